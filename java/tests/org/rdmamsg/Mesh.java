package org.rdmamsg;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Real rdmamsgd processes over softrdma for the tests: the i-th node on
 * 127.0.0.(i+1), all on one free port, each with its own configuration and
 * socket in a temporary directory, started with {@code softrdma-run rdmamsgd
 * -c CONFIG --node NAME} (paths from the environment CTest sets:
 * RDMAMSG_DAEMON, SOFTRDMA_RUN). {@link MeshExtension} stops every daemon
 * after each test and prints their logs when it failed.
 */
final class Mesh implements AutoCloseable {
  static final String DAEMON = env("RDMAMSG_DAEMON");
  static final String SOFTRDMA_RUN = env("SOFTRDMA_RUN");
  private static final List<Mesh> LIVE = new ArrayList<>();

  final Path dir;
  private final List<String> names;
  private final Map<String, String> extra = new LinkedHashMap<>();
  private final Map<String, Process> daemons = new LinkedHashMap<>();
  private int port;

  private Mesh(List<String> names) throws IOException {
    this.names = names;
    this.dir = Files.createTempDirectory("rdmamsg-java-");
    synchronized (LIVE) {
      LIVE.add(this);
    }
  }

  /** alpha and beta, connected to each other. */
  static Mesh pair() throws Exception {
    return builder("alpha", "beta").start();
  }

  static Mesh builder(String... names) throws IOException {
    return new Mesh(List.of(names));
  }

  /** More configuration lines for every node. */
  Mesh with(String yaml) {
    for (String n : names) extra.merge(n, yaml + "\n", String::concat);
    return this;
  }

  /** More configuration lines for one node. */
  Mesh with(String node, String yaml) {
    extra.merge(node, yaml + "\n", String::concat);
    return this;
  }

  /** Starts every daemon and waits until each sees the others established. */
  Mesh start() throws Exception {
    for (int attempt = 0; attempt < 5; attempt++) {
      port = freePort();
      for (String n : names) startDaemon(n);
      boolean up = true;
      for (String n : names) up = up && Wait.until(() -> answers(n) || !running(n));
      if (up && names.stream().allMatch(this::running)) {
        if (!Wait.until(this::established)) throw new AssertionError("the mesh did not form");
        return this;
      }
      boolean taken = false;
      for (String n : names) taken |= log(n).contains("cannot bind");
      stopAll();
      if (!taken) throw new AssertionError("a daemon did not start:\n" + logs());
    }
    throw new AssertionError("no free port for the mesh");
  }

  String socket(String node) {
    return dir.resolve(node + ".sock").toString();
  }

  Path config(String node) {
    return dir.resolve(node + ".yaml");
  }

  Client connect(String node) throws RdmamsgException {
    return Client.connect(socket(node));
  }

  Client connect(String node, ConnectOptions options) throws RdmamsgException {
    return Client.connect(socket(node), options);
  }

  private void startDaemon(String node) throws IOException {
    StringBuilder y = new StringBuilder("peers:\n");
    for (int i = 0; i < names.size(); i++) {
      y.append("  - {name: ").append(names.get(i)).append(", address: ").append(address(i))
          .append(':').append(port).append("}\n");
    }
    y.append("socket: ").append(socket(node)).append('\n')
        .append("heartbeat_interval: 200ms\nheartbeat_timeout: 1s\n")
        .append("reconnect_backoff_min: 50ms\nreconnect_backoff_max: 1s\n")
        .append(extra.getOrDefault(node, ""));
    Files.writeString(config(node), y.toString());
    Path log = dir.resolve(node + ".log");
    ProcessBuilder pb = new ProcessBuilder(SOFTRDMA_RUN, DAEMON, "-c", config(node).toString(),
        "--node", node);
    pb.redirectErrorStream(true);
    pb.redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
    pb.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    daemons.put(node, pb.start());
  }

  /** Starts a stopped daemon again and waits until it answers. */
  void restart(String node) throws Exception {
    startDaemon(node);
    if (!Wait.until(() -> answers(node))) throw new AssertionError(node + " did not restart");
  }

  private static String address(int i) {
    return "127.0.0." + (i + 1);
  }

  boolean running(String node) {
    Process p = daemons.get(node);
    return p != null && p.isAlive();
  }

  Process process(String node) {
    return daemons.get(node);
  }

  /** SIGKILL, and wait for it to be gone. */
  void kill9(String node) throws InterruptedException {
    Process p = daemons.get(node);
    p.destroyForcibly();
    if (!p.waitFor(10, TimeUnit.SECONDS)) throw new AssertionError(node + " survived SIGKILL");
  }

  /** SIGTERM, and wait for the exit; its exit code. */
  int stop(String node) throws InterruptedException {
    Process p = daemons.get(node);
    p.destroy();
    if (!p.waitFor(10, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError(node + " did not stop on SIGTERM within 10 s");
    }
    return p.exitValue();
  }

  String log(String node) {
    try {
      return Files.readString(dir.resolve(node + ".log"));
    } catch (IOException e) {
      return "";
    }
  }

  String logs() {
    StringBuilder b = new StringBuilder();
    for (String n : names) b.append("--- ").append(n).append(".log\n").append(log(n));
    return b.toString();
  }

  private boolean answers(String node) {
    try (Client c = Client.connect(socket(node),
        new ConnectOptions().timeout(Duration.ofMillis(500)))) {
      c.status(Duration.ofMillis(500));
      return true;
    } catch (RdmamsgException e) {
      return false;
    }
  }

  // A peer's state (status "peers"); its rails' states (active, standby, ...) are not matched.
  private static final Pattern STATE = Pattern.compile(
      "\"state\"\\s*:\\s*\"(idle|connecting|established|disconnected|stopping|stopped)\"");

  /** Every node sees every other node established. */
  boolean established() {
    for (String n : names) {
      try (Client c = Client.connect(socket(n),
          new ConnectOptions().timeout(Duration.ofMillis(500)))) {
        Matcher m = STATE.matcher(c.status(Duration.ofMillis(500)));
        int up = 0;
        while (m.find()) {
          if (!m.group(1).equals("established")) return false;
          up++;
        }
        if (up != names.size() - 1) return false;
      } catch (RdmamsgException e) {
        return false;
      }
    }
    return true;
  }

  /** A port free on every node's address (softrdma maps an rdma_cm port to TCP). */
  private int freePort() throws IOException {
    for (int tries = 0; tries < 100; tries++) {
      int p;
      try (ServerSocket s = new ServerSocket()) {
        s.bind(new InetSocketAddress(InetAddress.getByName(address(0)), 0));
        p = s.getLocalPort();
      }
      boolean free = true;
      for (int i = 0; i < names.size() && free; i++) {
        try (ServerSocket s = new ServerSocket()) {
          s.bind(new InetSocketAddress(InetAddress.getByName(address(i)), p));
        } catch (IOException e) {
          free = false;
        }
      }
      if (free) return p;
    }
    throw new IOException("no port free on every node's address");
  }

  private void stopAll() {
    for (Process p : daemons.values()) p.destroy();
    for (Process p : daemons.values()) {
      try {
        if (!p.waitFor(10, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          p.waitFor(10, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        p.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
    daemons.clear();
  }

  /** Stops every daemon and removes the directory (kept with RDMAMSG_ITEST_KEEP=1). */
  @Override
  public void close() {
    stopAll();
    synchronized (LIVE) {
      LIVE.remove(this);
    }
    if ("1".equals(System.getenv("RDMAMSG_ITEST_KEEP"))) {
      System.err.println("kept " + dir);
      return;
    }
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      // a temporary directory left behind
    }
  }

  /** The meshes a test started and has not closed. */
  static List<Mesh> live() {
    synchronized (LIVE) {
      return new ArrayList<>(LIVE);
    }
  }

  private static String env(String name) {
    String v = System.getenv(name);
    return v == null ? "" : v;
  }
}
