// The mesh's lifecycle (mesh_state.h).
#include "daemon/peer/mesh_state.h"

namespace rdmamsg::peer {

const char* toString(MeshState s) {
  switch (s) {
    case MeshState::kCreated:
      return "created";
    case MeshState::kStarting:
      return "starting";
    case MeshState::kRunning:
      return "running";
    case MeshState::kReloading:
      return "reloading";
    case MeshState::kStopping:
      return "stopping";
    case MeshState::kStopped:
      return "stopped";
  }
  return "?";
}

bool allowedEdge(MeshState from, MeshState to) {
  switch (from) {
    case MeshState::kCreated:
      return to == MeshState::kStarting || to == MeshState::kStopping;
    case MeshState::kStarting:
      return to == MeshState::kRunning || to == MeshState::kStopping;
    case MeshState::kRunning:
      return to == MeshState::kReloading || to == MeshState::kStopping;
    case MeshState::kReloading:
      return to == MeshState::kRunning || to == MeshState::kStopping;
    case MeshState::kStopping:
      return to == MeshState::kStopped;
    case MeshState::kStopped:
      return false;
  }
  return false;
}

}  // namespace rdmamsg::peer
