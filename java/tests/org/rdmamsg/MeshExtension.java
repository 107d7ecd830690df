package org.rdmamsg;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.AfterTestExecutionCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Stops every daemon a test started, even when it failed, and prints their
 * logs when it did.
 */
final class MeshExtension implements AfterTestExecutionCallback, AfterEachCallback {
  @Override
  public void afterTestExecution(ExtensionContext context) {
    if (context.getExecutionException().isEmpty()) return;
    for (Mesh m : Mesh.live()) System.err.println(m.logs());
  }

  @Override
  public void afterEach(ExtensionContext context) {
    for (Mesh m : Mesh.live()) m.close();
  }
}
