/**
 * rdmamsg's Java client: talks to the host's rdmamsgd over its Unix socket,
 * in pure Java (no JNI). Start with {@link org.rdmamsg.Client}.
 */
module org.rdmamsg {
  exports org.rdmamsg;
}
