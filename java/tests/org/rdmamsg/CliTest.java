package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code java -jar rdmamsg.jar send|listen} behave like {@code rdmamsg
 * send|listen}, exit codes included, and talk to the C++ tool; the examples
 * run. Every process is bounded in time and stopped by the test.
 */
@Timeout(180)
@ExtendWith(MeshExtension.class)
class CliTest {
  static final String JAVA = Path.of(System.getProperty("java.home"), "bin", "java").toString();
  static final String JAR = System.getenv("RDMAMSG_JAR");
  static final String EXAMPLES = System.getenv("RDMAMSG_EXAMPLES_JAR");
  static final String CLI = System.getenv("RDMAMSG_CLI");

  record Result(int code, String out, String err) {}

  /** Starts a program with stdin from {@code input}, output to files in the mesh's directory. */
  private static Process start(Mesh mesh, String name, String input, List<String> argv)
      throws Exception {
    Path in = mesh.dir.resolve(name + ".in");
    Files.writeString(in, input);
    ProcessBuilder pb = new ProcessBuilder(argv);
    pb.redirectInput(in.toFile());
    pb.redirectOutput(mesh.dir.resolve(name + ".out").toFile());
    pb.redirectError(mesh.dir.resolve(name + ".err").toFile());
    return pb.start();
  }

  private static Result finish(Mesh mesh, String name, Process p) throws Exception {
    if (!p.waitFor(60, TimeUnit.SECONDS)) {
      p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      throw new AssertionError(name + " did not finish within 60 s");
    }
    return new Result(p.exitValue(), Files.readString(mesh.dir.resolve(name + ".out")),
        Files.readString(mesh.dir.resolve(name + ".err")));
  }

  private static List<String> jar(Mesh mesh, String node, String... args) {
    List<String> argv = new ArrayList<>(List.of(JAVA, "-jar", JAR, "--socket", mesh.socket(node)));
    argv.addAll(List.of(args));
    return argv;
  }

  private static Result run(Mesh mesh, String name, String input, List<String> argv)
      throws Exception {
    return finish(mesh, name, start(mesh, name, input, argv));
  }

  /** Waits until {@code service} is registered on {@code node}. */
  private static void awaitService(Mesh mesh, String node, String service) throws Exception {
    assertTrue(Wait.until(() -> {
      try (Client c = mesh.connect(node)) {
        return c.status().contains("\"" + service + "\"");
      }
    }), service + " was not registered on " + node);
  }

  @Test
  void linesSentWithTheJarArePrintedByTheJarsListener() throws Exception {
    Mesh mesh = Mesh.pair();
    Process listen = start(mesh, "listen", "", jar(mesh, "beta", "listen", "inbox", "--count", "3"));
    try {
      awaitService(mesh, "beta", "inbox");
      Result send = run(mesh, "send", "one\ntwo\nthree\n", jar(mesh, "alpha", "send", "beta/inbox"));
      assertEquals(0, send.code(), send.err());
      Result heard = finish(mesh, "listen", listen);
      assertEquals(0, heard.code(), heard.err());
      assertEquals("one\ntwo\nthree\n", heard.out());
    } finally {
      listen.destroyForcibly();
    }
  }

  @Test
  void theJarAndTheCppToolTalkToEachOther() throws Exception {
    Mesh mesh = Mesh.pair();
    Process listen = start(mesh, "listen", "", jar(mesh, "beta", "listen", "inbox", "-n", "2"));
    try {
      awaitService(mesh, "beta", "inbox");
      Result send = run(mesh, "cpp-send", "from c++\nagain\n",
          List.of(CLI, "--socket", mesh.socket("alpha"), "send", "beta/inbox"));
      assertEquals(0, send.code(), send.err());
      assertEquals("from c++\nagain\n", finish(mesh, "listen", listen).out());
    } finally {
      listen.destroyForcibly();
    }
    Process cppListen = start(mesh, "cpp-listen", "",
        List.of(CLI, "--socket", mesh.socket("beta"), "listen", "inbox", "--count", "1"));
    try {
      awaitService(mesh, "beta", "inbox");
      Result send = run(mesh, "send", "", jar(mesh, "alpha", "send", "beta/inbox", "from java"));
      assertEquals(0, send.code(), send.err());
      assertEquals("from java\n", finish(mesh, "cpp-listen", cppListen).out());
    } finally {
      cppListen.destroyForcibly();
    }
  }

  @Test
  void exitCodesAreRdmamsgs() throws Exception {
    Mesh mesh = Mesh.builder("alpha", "beta").with("alpha", "max_message_size: 4KiB").start();
    Result r = run(mesh, "node", "", jar(mesh, "alpha", "send", "gamma/x", "hi"));
    assertEquals(4, r.code(), r.err());
    assertTrue(r.err().contains("gamma"), r.err());
    r = run(mesh, "service", "", jar(mesh, "alpha", "send", "beta/nobody", "hi"));
    assertEquals(5, r.code(), r.err());
    assertTrue(r.err().contains("nobody") && r.err().contains("beta"), r.err());
    assertTrue(r.err().contains("message 1 failed (unknown_service)"), r.err());
    r = run(mesh, "large", "x".repeat(5000) + "\n", jar(mesh, "alpha", "send", "beta/nobody"));
    assertEquals(7, r.code(), r.err());
    r = run(mesh, "usage", "", jar(mesh, "alpha", "send", "no-slash"));
    assertEquals(2, r.code(), r.err());
    r = run(mesh, "usage2", "", jar(mesh, "alpha", "frobnicate"));
    assertEquals(2, r.code(), r.err());
    r = run(mesh, "help", "", jar(mesh, "alpha", "--help"));
    assertEquals(0, r.code(), r.err());
    assertTrue(r.out().contains("Exit codes"), r.out());
    r = run(mesh, "nodaemon", "", List.of(JAVA, "-jar", JAR, "--socket",
        mesh.dir.resolve("none.sock").toString(), "send", "beta/x", "hi"));
    assertEquals(3, r.code(), r.err());

    Process holder = start(mesh, "holder", "", jar(mesh, "alpha", "listen", "taken"));
    try {
      awaitService(mesh, "alpha", "taken");
      r = run(mesh, "dup", "", jar(mesh, "alpha", "listen", "taken", "--count", "1"));
      assertEquals(8, r.code(), r.err());
      assertTrue(r.err().contains("duplicate_service"), r.err());
      holder.destroy(); // SIGTERM: exits 0
      assertEquals(0, finish(mesh, "holder", holder).code());
    } finally {
      holder.destroyForcibly();
    }
    r = run(mesh, "status", "", jar(mesh, "alpha", "status"));
    assertEquals(0, r.code(), r.err());
    assertTrue(r.out().contains("\"alpha\""), r.out());
  }

  @Test
  void theExamplesRun() throws Exception {
    Mesh mesh = Mesh.pair();
    String cp = JAR + File.pathSeparator + EXAMPLES;
    Process listener = start(mesh, "listener", "",
        List.of(JAVA, "-cp", cp, "Listener", "inbox", "2", mesh.socket("beta")));
    try {
      awaitService(mesh, "beta", "inbox");
      Result sent = run(mesh, "sender", "hello\nworld\n",
          List.of(JAVA, "-cp", cp, "Sender", "beta/inbox", mesh.socket("alpha")));
      assertEquals(0, sent.code(), sent.err());
      assertTrue(sent.out().contains("2 of 2 messages taken"), sent.out());
      Result heard = finish(mesh, "listener", listener);
      assertEquals(0, heard.code(), heard.err());
      assertEquals("alpha/: hello\nalpha/: world\n", heard.out());
    } finally {
      listener.destroyForcibly();
    }
  }
}
