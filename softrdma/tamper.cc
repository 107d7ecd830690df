// Tampering on the wire, for tests (tamper.h).
#include "tamper.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "base.h"
#include "conn.h"

namespace softrdma {

std::atomic<bool> g_tamperArmed{false};

namespace {

enum class Kind { Flip, Truncate, Replay, Reorder, Inject };

struct Plan {
  Kind kind = Kind::Flip;
  bool anyAddress = true;
  in_addr to{};
  std::vector<uint8_t> inject;
  // reorder: the held frame, its QP.
  bool holding = false;
  uint32_t heldQpn = 0;
  FrameHeader heldHeader{};
  std::vector<uint8_t> heldPayload;
  uint64_t done = 0;
};

std::mutex g_mu;  // taken after a QP's mu, never before it
Plan g_plan;

std::vector<uint8_t> payloadOf(const ibv_send_wr& w) {
  std::vector<uint8_t> p;
  for (int i = 0; i < w.num_sge; i++) {
    const auto* b = reinterpret_cast<const uint8_t*>(w.sg_list[i].addr);
    p.insert(p.end(), b, b + w.sg_list[i].length);
  }
  return p;
}

// The QP's peer (its address vector's GID, IPv4-mapped) is the one aimed at.
bool aimedAt(const Qp* qp) {
  if (g_plan.anyAddress) return true;
  return std::memcmp(&qp->attr.ah_attr.grh.dgid.raw[12], &g_plan.to, 4) == 0;
}

void sendFrame(Qp* qp, FrameHeader h, const std::vector<uint8_t>& payload) {
  h.len = static_cast<uint32_t>(payload.size());
  Conn::TxIov v[2] = {{&h, sizeof h, false, true, true},
                      {payload.data(), payload.size(), false, false, true}};
  qp->conn->sendv(v, payload.empty() ? 1 : 2);
}

// One more SEND on the connection: the next sequence number, a WQE that
// completes without a completion entry.
void injectFrame(Qp* qp, const FrameHeader& like, const std::vector<uint8_t>& payload) {
  SendWqe x{};
  x.opcode = IBV_WC_SEND;
  x.preset = IBV_WC_SUCCESS;
  x.injected = true;
  x.psn = qp->sq.next_psn++;
  qp->sq.wqes.push_back(x);
  qp->sq.used++;
  FrameHeader h = like;
  h.psn = x.psn;
  h.flags = static_cast<uint8_t>(h.flags & ~kFlagAckNow);
  sendFrame(qp, h, payload);
}

void finish() {
  g_plan.done++;
  g_plan.holding = false;
  g_plan.heldPayload.clear();
  g_tamperArmed.store(false, std::memory_order_relaxed);
}

bool parseHex(const std::string& hex, std::vector<uint8_t>& out) {
  if (hex.empty() || hex.size() % 2 != 0) return false;
  out.clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    char* end = nullptr;
    const std::string byte = hex.substr(i, 2);
    const unsigned long v = strtoul(byte.c_str(), &end, 16);
    if (end != byte.c_str() + 2) return false;
    out.push_back(static_cast<uint8_t>(v));
  }
  return true;
}

}  // namespace

bool tamperSend(Qp* qp, const ibv_send_wr& w, const FrameHeader& h) {
  std::lock_guard lk(g_mu);
  if (!tamperArmed() || !qp->conn || !aimedAt(qp)) return false;
  std::vector<uint8_t> payload = payloadOf(w);
  switch (g_plan.kind) {
    case Kind::Flip:
      if (!payload.empty()) payload[payload.size() / 2] ^= 0x10;
      sendFrame(qp, h, payload);
      break;
    case Kind::Truncate:
      payload.resize(payload.size() > 8 ? payload.size() - 8 : 0);
      sendFrame(qp, h, payload);
      break;
    case Kind::Replay:
      sendFrame(qp, h, payload);
      injectFrame(qp, h, payload);
      break;
    case Kind::Inject:
      sendFrame(qp, h, payload);
      injectFrame(qp, h, g_plan.inject);
      break;
    case Kind::Reorder:
      if (!g_plan.holding) {
        g_plan.holding = true;
        g_plan.heldQpn = qp->qp.qp_num;
        g_plan.heldHeader = h;
        g_plan.heldPayload = std::move(payload);
        debugLog("tamper: QP %u: holding PSN %u", qp->qp.qp_num, h.psn);
        return true;
      }
      if (g_plan.heldQpn != qp->qp.qp_num) return false;
      // The sequence numbers in order, the payloads swapped.
      sendFrame(qp, g_plan.heldHeader, payload);
      sendFrame(qp, h, g_plan.heldPayload);
      break;
  }
  debugLog("tamper: QP %u: PSN %u altered", qp->qp.qp_num, h.psn);
  finish();
  return true;
}

std::string tamperCommand(const std::string& kind, const std::string& addr) {
  std::lock_guard lk(g_mu);
  if (kind == "status" && addr.empty()) return "ok\n" + std::to_string(g_plan.done) + "\n";
  // A held frame goes out with the next SEND of its QP, never without it.
  if (g_plan.holding) return "error: tamper: a reordered SEND is held until its QP's next SEND";
  if (kind == "off" && addr.empty()) {
    g_tamperArmed.store(false, std::memory_order_relaxed);
    return "ok";
  }
  Plan next;
  next.done = g_plan.done;
  if (kind == "flip") {
    next.kind = Kind::Flip;
  } else if (kind == "truncate") {
    next.kind = Kind::Truncate;
  } else if (kind == "replay") {
    next.kind = Kind::Replay;
  } else if (kind == "reorder") {
    next.kind = Kind::Reorder;
  } else if (kind.rfind("inject:", 0) == 0) {
    next.kind = Kind::Inject;
    if (!parseHex(kind.substr(7), next.inject)) return "error: tamper: inject:HEX needs bytes";
  } else {
    return "error: tamper KIND [ADDR]: KIND is flip, truncate, replay, reorder, inject:HEX, off "
           "or status";
  }
  if (!addr.empty()) {
    next.anyAddress = false;
    if (inet_pton(AF_INET, addr.c_str(), &next.to) != 1)
      return "error: tamper: ADDR must be an IPv4 address";
  }
  g_plan = std::move(next);
  g_tamperArmed.store(true, std::memory_order_relaxed);
  return "ok";
}

}  // namespace softrdma
