// The rest of libibverbs' public API: string helpers and rate conversions
// (pure functions, so that programs linked only against softrdma have them)
// and the features softrdma does not emulate, which fail the way an
// unsupporting device does (EOPNOTSUPP / NULL with errno).
#include <cerrno>
#include <cstring>

#include "base.h"

using namespace softrdma;

SOFTRDMA_API const char* ibv_wc_status_str(ibv_wc_status status) {
  static const char* const kNames[] = {
      "success",
      "local length error",
      "local QP operation error",
      "local EE context operation error",
      "local protection error",
      "Work Request Flushed Error",
      "memory management operation error",
      "bad response error",
      "local access error",
      "remote invalid request error",
      "remote access error",
      "remote operation error",
      "transport retry counter exceeded",
      "RNR retry counter exceeded",
      "local RDD violation error",
      "remote invalid RD request",
      "aborted error",
      "invalid EE context number",
      "invalid EE context state",
      "fatal error",
      "response timeout error",
      "general error",
      "TM error",
      "TM rendezvous pending",
  };
  auto i = static_cast<size_t>(status);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown";
}

SOFTRDMA_API const char* ibv_event_type_str(ibv_event_type event) {
  static const char* const kNames[] = {
      "CQ error",
      "local work queue catastrophic error",
      "invalid request local work queue error",
      "local access violation work queue error",
      "communication established",
      "send queue drained",
      "path migrated",
      "path migration request error",
      "local catastrophic error",
      "port active",
      "port error",
      "LID change",
      "P_Key change",
      "SM change",
      "SRQ catastrophic error",
      "SRQ limit reached",
      "last WQE reached",
      "client reregistration",
      "GID table change",
      "WQ fatal",
  };
  auto i = static_cast<size_t>(event);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown";
}

SOFTRDMA_API const char* ibv_node_type_str(ibv_node_type type) {
  switch (type) {
    case IBV_NODE_CA:
      return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH:
      return "InfiniBand switch";
    case IBV_NODE_ROUTER:
      return "InfiniBand router";
    case IBV_NODE_RNIC:
      return "iWARP NIC";
    case IBV_NODE_USNIC:
      return "usNIC";
    case IBV_NODE_USNIC_UDP:
      return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED:
      return "unspecified";
    default:
      return "unknown";
  }
}

SOFTRDMA_API const char* ibv_port_state_str(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP:
      return "PORT_NOP";
    case IBV_PORT_DOWN:
      return "PORT_DOWN";
    case IBV_PORT_INIT:
      return "PORT_INIT";
    case IBV_PORT_ARMED:
      return "PORT_ARMED";
    case IBV_PORT_ACTIVE:
      return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "PORT_ACTIVE_DEFER";
    default:
      return "invalid state";
  }
}

SOFTRDMA_API int ibv_rate_to_mult(ibv_rate rate) {
  switch (rate) {
    case IBV_RATE_2_5_GBPS:
      return 1;
    case IBV_RATE_5_GBPS:
      return 2;
    case IBV_RATE_10_GBPS:
      return 4;
    case IBV_RATE_20_GBPS:
      return 8;
    case IBV_RATE_30_GBPS:
      return 12;
    case IBV_RATE_40_GBPS:
      return 16;
    case IBV_RATE_60_GBPS:
      return 24;
    case IBV_RATE_80_GBPS:
      return 32;
    case IBV_RATE_120_GBPS:
      return 48;
    default:
      return -1;
  }
}

SOFTRDMA_API ibv_rate mult_to_ibv_rate(int mult) {
  switch (mult) {
    case 1:
      return IBV_RATE_2_5_GBPS;
    case 2:
      return IBV_RATE_5_GBPS;
    case 4:
      return IBV_RATE_10_GBPS;
    case 8:
      return IBV_RATE_20_GBPS;
    case 12:
      return IBV_RATE_30_GBPS;
    case 16:
      return IBV_RATE_40_GBPS;
    case 24:
      return IBV_RATE_60_GBPS;
    case 32:
      return IBV_RATE_80_GBPS;
    case 48:
      return IBV_RATE_120_GBPS;
    default:
      return IBV_RATE_MAX;
  }
}

SOFTRDMA_API int ibv_rate_to_mbps(ibv_rate rate) {
  int mult = ibv_rate_to_mult(rate);
  return mult > 0 ? mult * 2500 : -1;
}

SOFTRDMA_API ibv_rate mbps_to_ibv_rate(int mbps) {
  return mult_to_ibv_rate(mbps / 2500);
}

// ---------------------------------------------------------- unsupported

SOFTRDMA_API ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
SOFTRDMA_API int ibv_set_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}
SOFTRDMA_API int ibv_query_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}
SOFTRDMA_API int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) {
  return EOPNOTSUPP;
}
// Device memory is not emulated (ibv_alloc_dm is EOPNOTSUPP): none to import.
SOFTRDMA_API ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
SOFTRDMA_API void ibv_unimport_dm(ibv_dm*) {}
SOFTRDMA_API int ibv_dontfork_range(void*, size_t) {
  return 0;
}
SOFTRDMA_API int ibv_dofork_range(void*, size_t) {
  return 0;
}
