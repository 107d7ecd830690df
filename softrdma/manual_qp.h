// QPs connected without rdma_cm (manual_qp.cc).
#pragma once

#include <memory>

#include "base.h"
#include "wire.h"

namespace softrdma {

// QPs connected without rdma_cm, by ibv_modify_qp with the peer's GID and
// QP number (manual_qp.cc).
void manualConnect(const std::shared_ptr<Qp>& qp);
void manualAttach(const std::shared_ptr<Conn>& c, const CmMessage& m);
void manualForget(uint32_t qpn);
// The QP was moved to RESET: a connection made without rdma_cm is dropped,
// and a new one is made when the QP reaches RTR again (a QP reset and
// brought back to RTS works again, as on rxe).
void manualReset(const std::shared_ptr<Qp>& qp);

}  // namespace softrdma
