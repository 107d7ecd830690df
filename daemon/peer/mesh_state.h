// The lifecycle of the mesh (mesh.h) and which changes of it are allowed.
#pragma once

namespace rdmamsg::peer {

// The mesh's lifecycle, with one checked transition (Mesh::setState):
//   created → starting → running ⇄ reloading;  starting, running, reloading → stopping → stopped
// Starting: start() is listening and checking the device's limits.
// Reloading: prepareReload() found that the new configuration fits; the
// caller makes it current and calls applyPeers(). Stopping: shutdown() was
// called; no connection is accepted or dialed; stopped once every
// connection is torn down (or after a bounded wait).
enum class MeshState { kCreated, kStarting, kRunning, kReloading, kStopping, kStopped };
const char* toString(MeshState s);
bool allowedEdge(MeshState from, MeshState to);

}  // namespace rdmamsg::peer
