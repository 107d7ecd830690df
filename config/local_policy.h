// rdmamsg::config::LocalPolicy: which local users may connect to rdmamsgd's
// Unix socket, register which services, and send to which destinations (the
// `local_policy` key; docs/security.md). The loader builds it with every user
// and group name resolved to its id; the daemon checks it against the
// SO_PEERCRED credentials (and SO_PEERGROUPS supplementary groups) it reads
// once when a client connects.
//
// Semantics, in short:
// - no `local_policy`: every process that can open the socket may do anything;
// - `connect` absent: every process that can open the socket may connect;
//   present: only the users and groups it names;
// - `register` / `send` / `publish` / `subscribe` absent: no restriction on
//   that request; present: a list of rules, the first rule whose pattern
//   matches the service (the destination, the published subject, the
//   subscription pattern — a rule's subject pattern must cover all of it)
//   decides, and a request no rule matches is refused;
// - uid 0 (root) is always allowed: it can change the configuration and the
//   daemon anyway.
#pragma once

#include <sys/types.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmamsg::config {

// Who a rule admits: users and groups, by id (the loader resolves names).
struct Principals {
  bool anyUser = false;  // users: ["*"]
  std::vector<uid_t> uids;
  std::vector<gid_t> gids;
  std::vector<std::string> users, groups;  // as written, for messages

  // "users alice, 1001; groups apps" (or "nobody but root").
  std::string toString() const;
  bool operator==(const Principals&) const = default;
};

// A name pattern: an exact name, or a prefix followed by '*' ("billing.*";
// "*" alone matches every name).
struct NamePattern {
  std::string stem;  // the name, or the prefix without its '*'
  bool prefix = false;

  bool matches(std::string_view name) const {
    return prefix ? name.substr(0, stem.size()) == stem : name == stem;
  }
  std::string toString() const { return prefix ? stem + "*" : stem; }
  bool operator==(const NamePattern&) const = default;
};

// "node/service", each half a NamePattern ("*/audit*", "beta/billing").
struct DestinationPattern {
  NamePattern node, service;

  bool matches(std::string_view n, std::string_view s) const {
    return node.matches(n) && service.matches(s);
  }
  std::string toString() const { return node.toString() + "/" + service.toString(); }
  bool operator==(const DestinationPattern&) const = default;
};

struct RegisterRule {
  std::vector<NamePattern> services;
  Principals who;
  bool operator==(const RegisterRule&) const = default;
};

struct SendRule {
  std::vector<DestinationPattern> destinations;
  Principals who;
  bool operator==(const SendRule&) const = default;
};

// A subject pattern of a publish or subscribe rule (common/subject.h).
struct SubjectPattern {
  std::string text;
  std::string toString() const { return text; }
  bool operator==(const SubjectPattern&) const = default;
};

struct SubjectRule {
  std::vector<SubjectPattern> subjects;
  Principals who;
  bool operator==(const SubjectRule&) const = default;
};

struct LocalPolicy {
  std::optional<Principals> connect;
  std::optional<std::vector<RegisterRule>> registerRules;
  std::optional<std::vector<SendRule>> sendRules;
  std::optional<std::vector<SubjectRule>> publishRules, subscribeRules;
  bool operator==(const LocalPolicy&) const = default;
};

// A connected process as the policy sees it.
struct Identity {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::span<const gid_t> groups;  // supplementary groups
  bool known = true;              // false: the credentials could not be read
};

// The outcome of one check. When refused, `rule` names the rule that decided
// ("local_policy.register[1]", or "local_policy.register" when none matched)
// and `reason` says why, in a sentence for the client and the log.
struct Verdict {
  bool allowed = true;
  std::string rule;
  std::string reason;
  explicit operator bool() const { return allowed; }
};

// True when `who` admits the identity (uid, primary gid or a supplementary group).
bool admits(const Principals& who, const Identity& id);

Verdict checkConnect(const LocalPolicy& policy, const Identity& id);
Verdict checkRegister(const LocalPolicy& policy, const Identity& id, std::string_view service);
Verdict checkSend(const LocalPolicy& policy, const Identity& id, std::string_view node,
                  std::string_view service);
// Publishing (or a request) to `subject`; subscribing to `pattern`: a rule
// decides when one of its patterns covers every subject `pattern` matches.
Verdict checkPublish(const LocalPolicy& policy, const Identity& id, std::string_view subject);
Verdict checkSubscribe(const LocalPolicy& policy, const Identity& id, std::string_view pattern);
// Whether every subject `inner` matches also matches `outer` (both valid patterns).
bool covers(std::string_view outer, std::string_view inner);

// One line: every part of the policy, for the startup log and reload messages.
std::string describe(const std::optional<LocalPolicy>& policy);

}  // namespace rdmamsg::config
