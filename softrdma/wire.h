// softrdma's wire format: the frames one TCP connection carries between two
// softrdma processes. A connection first carries the CM handshake of one
// rdma_cm connection (REQ, REP or REJ, RTU), then the RC traffic of its QP
// (requests one way, ACK/NAK/READ_RESP the other way), then DREQ/DREP.
//
// Every frame is a 32-byte header followed by `len` payload bytes. Fields are
// in host byte order: both ends of a softrdma connection run on machines of
// the same kind. PSNs number the requests of one direction from 0.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softrdma {

enum class FrameType : uint8_t {
  // Connection management.
  Req = 1,  // CmMessage
  Rep = 2,  // CmMessage
  Rtu = 3,
  Rej = 4,  // CmMessage (private data of the reject)
  Dreq = 5,
  Drep = 6,
  Attach = 7,  // CmMessage: a QP connected without rdma_cm (qpn: the dialer's
               // QP; private_data: the u32 number of the QP it connects to)
  // Requests (requester → responder).
  Send = 16,
  SendImm = 17,
  Write = 18,
  WriteImm = 19,
  ReadReq = 20,
  FetchAdd = 21,  // AtomicArgs; raddr/rkey: the remote 8 bytes
  CmpSwap = 22,   // AtomicArgs
  SendInv = 23,   // a SEND with invalidate: rkey is the key the responder invalidates
  // Responses (responder → requester).
  Ack = 32,         // every request with psn <= hdr.psn is done
  Nak = 33,         // request hdr.psn failed with hdr.syndrome
  ReadResp = 34,    // data for READ hdr.psn; acknowledges every earlier request
  AtomicResp = 35,  // the original 8 bytes for atomic hdr.psn; acknowledges the earlier ones
};

// NAK syndromes.
enum class Syndrome : uint16_t {
  None = 0,
  RnrRetryExceeded = 1,
  RemoteAccess = 2,
  RemoteInvalidRequest = 3,
  RemoteOperation = 4,
};

constexpr uint8_t kFlagSolicited = 0x01;
// On a request: the requester generates a completion for it (a signaled
// WR), so the responder acknowledges it at once. Requests without it (the
// unsignaled WRs, whose acknowledgement no program can observe) may have
// their ACK coalesced with later traffic (conn_tx.cc).
constexpr uint8_t kFlagAckNow = 0x02;

struct FrameHeader {
  uint8_t type;
  uint8_t flags;
  uint8_t rnr_retry;  // requester's rnr_retry (3 bits), on requests
  uint8_t reserved;
  uint16_t syndrome;
  uint16_t reserved2;
  uint32_t psn;
  uint32_t len;    // payload bytes that follow
  uint32_t imm;    // immediate data, as posted (network order)
  uint32_t rkey;   // WRITE / READ_REQ
  uint64_t raddr;  // WRITE / READ_REQ
};
static_assert(sizeof(FrameHeader) == 32, "wire header is 32 bytes");

// The READ_REQ carries the requested length in `imm` (it has no payload).

// The payload of an atomic request (FetchAdd: `compare_add` is the addend).
struct AtomicArgs {
  uint64_t compare_add;
  uint64_t swap;
};
static_assert(sizeof(AtomicArgs) == 16, "atomic request payload");

// CM handshake payload (REQ, REP, REJ).
struct CmMessage {
  uint32_t magic;  // kCmMagic
  uint32_t qpn;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t retry_count;
  uint8_t rnr_retry_count;
  uint8_t flow_control;
  uint8_t srq;
  uint8_t private_data_len;
  uint8_t reason;  // REJ: the IB CM reject reason reported as the event status
  uint8_t private_data[196];
};
constexpr uint32_t kCmMagic = 0x53524d31;  // "SRM1"
static_assert(sizeof(CmMessage) == 212, "CM message layout");

// Upper bound of a frame's payload (larger messages are an error on IB too:
// 2^31 is the verbs limit on a message).
constexpr uint32_t kMaxFramePayload = 1u << 31;

}  // namespace softrdma
