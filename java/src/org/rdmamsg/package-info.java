/**
 * The Java client of rdmamsg, the RDMA messaging daemon: applications connect
 * to their host's {@code rdmamsgd} over its Unix socket with
 * {@link org.rdmamsg.Client}, register services, send messages to services
 * on other nodes with a confirmation per message, and receive; subscribe to
 * subjects, publish to them, send requests and reply to them. Pure Java 17,
 * no native code, no dependencies beyond the JDK; it speaks version 2 of the
 * local protocol (docs/protocol.md, "Local client protocol").
 */
package org.rdmamsg;
