// The local access policy: checks (local_policy.h) and the loader's reading of
// the `local_policy` key (local_policy_reader.h).
#include "config/local_policy.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "common/subject.h"
#include "config/local_policy_reader.h"
#include "config/name.h"

namespace rdmamsg::config {

// --- checks -------------------------------------------------------------------------------

namespace {

bool isRoot(const Identity& id) {
  return id.known && id.uid == 0;
}

std::string who(const Identity& id) {
  if (!id.known) return "a client whose credentials could not be read";
  return "uid " + std::to_string(id.uid) + " (gid " + std::to_string(id.gid) + ")";
}

template <typename Pattern>
std::string patterns(const std::vector<Pattern>& list) {
  std::string out;
  for (const Pattern& p : list)
    out += (out.empty() ? "" : ", ") + p.toString();
  return out;
}

}  // namespace

std::string Principals::toString() const {
  std::string out;
  if (anyUser) out = "any user";
  std::string u, g;
  for (const std::string& name : users)
    if (name != "*") u += (u.empty() ? "" : ", ") + name;
  for (const std::string& name : groups)
    g += (g.empty() ? "" : ", ") + name;
  if (!u.empty()) out += (out.empty() ? "" : "; ") + std::string("users ") + u;
  if (!g.empty()) out += (out.empty() ? "" : "; ") + std::string("groups ") + g;
  return out.empty() ? "nobody but root" : out;
}

bool admits(const Principals& p, const Identity& id) {
  if (!id.known) return false;
  if (p.anyUser) return true;
  if (std::find(p.uids.begin(), p.uids.end(), id.uid) != p.uids.end()) return true;
  for (gid_t g : p.gids) {
    if (g == id.gid) return true;
    if (std::find(id.groups.begin(), id.groups.end(), g) != id.groups.end()) return true;
  }
  return false;
}

Verdict checkConnect(const LocalPolicy& policy, const Identity& id) {
  if (!policy.connect || isRoot(id) || admits(*policy.connect, id)) return {};
  return {false, "local_policy.connect",
          who(id) + " is not among the users and groups of local_policy.connect"};
}

Verdict checkRegister(const LocalPolicy& policy, const Identity& id, std::string_view service) {
  if (!policy.registerRules || isRoot(id)) return {};
  const auto& rules = *policy.registerRules;
  for (size_t i = 0; i < rules.size(); ++i) {
    const RegisterRule& r = rules[i];
    if (std::none_of(r.services.begin(), r.services.end(),
                     [&](const NamePattern& p) { return p.matches(service); }))
      continue;
    if (admits(r.who, id)) return {};
    const std::string rule = "local_policy.register[" + std::to_string(i) + "]";
    return {false, rule,
            "register " + std::string(service) + ": " + rule + " (services " +
                patterns(r.services) + ") does not allow " + who(id)};
  }
  return {false, "local_policy.register",
          "register " + std::string(service) + ": no rule of local_policy.register matches it"};
}

Verdict checkSend(const LocalPolicy& policy, const Identity& id, std::string_view node,
                  std::string_view service) {
  if (!policy.sendRules || isRoot(id)) return {};
  const auto& rules = *policy.sendRules;
  for (size_t i = 0; i < rules.size(); ++i) {
    const SendRule& r = rules[i];
    if (std::none_of(r.destinations.begin(), r.destinations.end(),
                     [&](const DestinationPattern& p) { return p.matches(node, service); }))
      continue;
    if (admits(r.who, id)) return {};
    const std::string rule = "local_policy.send[" + std::to_string(i) + "]";
    return {false, rule,
            "send to " + std::string(node) + "/" + std::string(service) + ": " + rule +
                " (destinations " + patterns(r.destinations) + ") does not allow " + who(id)};
  }
  return {false, "local_policy.send",
          "send to " + std::string(node) + "/" + std::string(service) +
              ": no rule of local_policy.send matches it"};
}

std::string describe(const std::optional<LocalPolicy>& policy) {
  if (!policy) return "-";
  std::string out = "connect[" + (policy->connect ? policy->connect->toString() : "anyone") + "]";
  out += " register[";
  if (!policy->registerRules) {
    out += "any";
  } else {
    std::string rules;
    for (const RegisterRule& r : *policy->registerRules)
      rules += (rules.empty() ? "" : " | ") + patterns(r.services) + ": " + r.who.toString();
    out += rules.empty() ? "none" : rules;
  }
  out += "] send[";
  if (!policy->sendRules) {
    out += "any";
  } else {
    std::string rules;
    for (const SendRule& r : *policy->sendRules)
      rules += (rules.empty() ? "" : " | ") + patterns(r.destinations) + ": " + r.who.toString();
    out += rules.empty() ? "none" : rules;
  }
  // Subjects are named once a rule restricts them (absent: any).
  for (const auto& [name, list] : {std::pair{"] publish[", &policy->publishRules},
                                   std::pair{"] subscribe[", &policy->subscribeRules}}) {
    if (!*list) continue;
    out += name;
    std::string rules;
    for (const SubjectRule& r : **list)
      rules += (rules.empty() ? "" : " | ") + patterns(r.subjects) + ": " + r.who.toString();
    out += rules.empty() ? "none" : rules;
  }
  return out + "]";
}

namespace {

Verdict checkSubjectRules(const std::optional<std::vector<SubjectRule>>& rules, const Identity& id,
                          std::string_view what, std::string_view key, std::string_view subject,
                          bool (*applies)(std::string_view, std::string_view)) {
  if (!rules || isRoot(id)) return {};
  for (size_t i = 0; i < rules->size(); ++i) {
    const SubjectRule& r = (*rules)[i];
    if (std::none_of(r.subjects.begin(), r.subjects.end(),
                     [&](const SubjectPattern& p) { return applies(p.text, subject); }))
      continue;
    if (admits(r.who, id)) return {};
    const std::string rule = "local_policy." + std::string(key) + "[" + std::to_string(i) + "]";
    return {false, rule,
            std::string(what) + " " + std::string(subject) + ": " + rule + " (subjects " +
                patterns(r.subjects) + ") does not allow " + who(id)};
  }
  return {false, "local_policy." + std::string(key),
          std::string(what) + " " + std::string(subject) + ": no rule of local_policy." +
              std::string(key) + " matches it"};
}

}  // namespace

Verdict checkPublish(const LocalPolicy& policy, const Identity& id, std::string_view subject) {
  return checkSubjectRules(policy.publishRules, id, "publish to", "publish", subject,
                           subject::matches);
}

Verdict checkSubscribe(const LocalPolicy& policy, const Identity& id, std::string_view pattern) {
  return checkSubjectRules(policy.subscribeRules, id, "subscribe to", "subscribe", pattern, covers);
}

bool covers(std::string_view outer, std::string_view inner) {
  std::string_view o[subject::kMaxTokens], in[subject::kMaxTokens];
  const size_t no = subject::tokenize(outer, o), ni = subject::tokenize(inner, in);
  for (size_t i = 0; i < no; i++) {
    if (o[i] == ">") return ni > i;  // the rest: one token or more
    if (i >= ni || in[i] == ">") return false;
    if (o[i] != "*" && o[i] != in[i]) return false;  // a literal covers only itself
  }
  return no == ni;
}

// --- reading the key ----------------------------------------------------------------------

namespace detail {
namespace {

constexpr std::array<std::string_view, 5> kPolicyKeys = {"connect", "register", "send", "publish",
                                                         "subscribe"};
constexpr std::array<std::string_view, 3> kSubjectRuleKeys = {"subjects", "users", "groups"};
constexpr std::array<std::string_view, 2> kConnectKeys = {"users", "groups"};
constexpr std::array<std::string_view, 3> kRegisterRuleKeys = {"services", "users", "groups"};
constexpr std::array<std::string_view, 3> kSendRuleKeys = {"destinations", "users", "groups"};

std::optional<unsigned long> numericId(const std::string& text) {
  if (text.empty() || text.size() > 10) return std::nullopt;
  unsigned long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value >= 4294967295ul) return std::nullopt;  // (uid_t)-1 means "no id"
  return value;
}

// Resolves a user name with getpwnam_r; nullopt when there is none. `why` says
// what went wrong when the lookup itself failed.
std::optional<uid_t> lookupUser(const std::string& name, std::string& why) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  int rc = 0;
  while ((rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 20))
    buf.resize(buf.size() * 2);
  if (rc != 0 && rc != ENOENT && rc != ESRCH) why = std::strerror(rc);
  if (found == nullptr) return std::nullopt;
  return found->pw_uid;
}

std::optional<gid_t> lookupGroup(const std::string& name, std::string& why) {
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  int rc = 0;
  while ((rc = ::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 20))
    buf.resize(buf.size() * 2);
  if (rc != 0 && rc != ENOENT && rc != ESRCH) why = std::strerror(rc);
  if (found == nullptr) return std::nullopt;
  return found->gr_gid;
}

// The elements of a list-valued key; reports (and returns nothing) when it is
// not a list of single values. An absent key is an empty list.
std::vector<YAML::Node> scalarList(const FieldMap& map, std::string_view key) {
  std::vector<YAML::Node> out;
  if (!map.has(key)) return out;
  const YAML::Node node = map.value(key);
  if (!node.IsSequence()) {
    map.report(key, "expected a list (like [a, b]), got " + describeNodeType(node));
    return out;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    if (!item.IsScalar()) {
      map.sink().add(item.Mark(), map.pathOf(key) + "[" + std::to_string(i) +
                                      "]: expected a single value, got " + describeNodeType(item));
      continue;
    }
    out.push_back(item);
  }
  return out;
}

// Reads `users` and `groups` of a mapping. `required`: at least one must be given.
Principals readPrincipals(const FieldMap& map, bool required) {
  Principals p;
  if (required && !map.has("users") && !map.has("groups")) {
    map.sink().add(map.mark(), map.path() + ": give users, groups or both (whom it allows)");
  }
  size_t i = 0;
  for (const YAML::Node& item : scalarList(map, "users")) {
    const std::string text = item.Scalar();
    const std::string where = map.pathOf("users") + "[" + std::to_string(i++) + "]";
    if (text == "*") {
      p.anyUser = true;
      p.users.push_back(text);
      continue;
    }
    if (auto id = numericId(text)) {
      p.uids.push_back(static_cast<uid_t>(*id));
      p.users.push_back(text);
      continue;
    }
    std::string why;
    if (auto uid = lookupUser(text, why)) {
      p.uids.push_back(*uid);
      p.users.push_back(text);
    } else {
      map.sink().add(item.Mark(), where + ": unknown user '" + text + "'" +
                                      (why.empty() ? "" : " (lookup failed: " + why + ")"));
    }
  }
  i = 0;
  for (const YAML::Node& item : scalarList(map, "groups")) {
    const std::string text = item.Scalar();
    const std::string where = map.pathOf("groups") + "[" + std::to_string(i++) + "]";
    if (text == "*") {
      map.sink().add(item.Mark(), where + ": '*' is not a group; write users: [\"*\"] for anyone");
      continue;
    }
    if (auto id = numericId(text)) {
      p.gids.push_back(static_cast<gid_t>(*id));
      p.groups.push_back(text);
      continue;
    }
    std::string why;
    if (auto gid = lookupGroup(text, why)) {
      p.gids.push_back(*gid);
      p.groups.push_back(text);
    } else {
      map.sink().add(item.Mark(), where + ": unknown group '" + text + "'" +
                                      (why.empty() ? "" : " (lookup failed: " + why + ")"));
    }
  }
  return p;
}

constexpr std::string_view kPatternRule =
    "a name (1..63 characters of A-Z a-z 0-9 . _ -), or a prefix of one followed by '*'";

std::optional<NamePattern> parseNamePattern(std::string_view text) {
  if (!text.empty() && text.back() == '*') {
    const std::string_view stem = text.substr(0, text.size() - 1);
    if (stem.size() >= kMaxNameLength || !hasOnlyNameChars(stem)) return std::nullopt;
    return NamePattern{std::string(stem), true};
  }
  if (!isValidName(text)) return std::nullopt;
  return NamePattern{std::string(text), false};
}

std::vector<NamePattern> readServicePatterns(const FieldMap& map) {
  std::vector<NamePattern> out;
  if (!map.has("services")) {
    map.report("services", "missing (the service names or prefixes the rule is about)");
    return out;
  }
  const std::vector<YAML::Node> items = scalarList(map, "services");
  if (items.empty() && !map.reported("services"))
    map.report("services", "empty: give at least one name or prefix");
  size_t i = 0;
  for (const YAML::Node& item : items) {
    const std::string where = map.pathOf("services") + "[" + std::to_string(i++) + "]";
    if (auto p = parseNamePattern(item.Scalar()))
      out.push_back(*p);
    else
      map.sink().add(item.Mark(),
                     where + ": '" + item.Scalar() + "' is not " + std::string(kPatternRule));
  }
  return out;
}

std::vector<SubjectPattern> readSubjectPatterns(const FieldMap& map) {
  std::vector<SubjectPattern> out;
  if (!map.has("subjects")) {
    map.report("subjects", "missing (the subject patterns the rule is about)");
    return out;
  }
  const std::vector<YAML::Node> items = scalarList(map, "subjects");
  if (items.empty() && !map.reported("subjects"))
    map.report("subjects", "empty: give at least one subject pattern");
  size_t i = 0;
  for (const YAML::Node& item : items) {
    const std::string where = map.pathOf("subjects") + "[" + std::to_string(i++) + "]";
    if (Status st = subject::checkPattern(item.Scalar()); !st.ok())
      map.sink().add(item.Mark(), where + ": '" + item.Scalar() + "': " + st.message());
    else
      out.push_back({item.Scalar()});
  }
  return out;
}

std::vector<DestinationPattern> readDestinationPatterns(const FieldMap& map) {
  std::vector<DestinationPattern> out;
  if (!map.has("destinations")) {
    map.report("destinations", "missing (the node/service destinations the rule is about)");
    return out;
  }
  const std::vector<YAML::Node> items = scalarList(map, "destinations");
  if (items.empty() && !map.reported("destinations"))
    map.report("destinations", "empty: give at least one node/service");
  size_t i = 0;
  for (const YAML::Node& item : items) {
    const std::string where = map.pathOf("destinations") + "[" + std::to_string(i++) + "]";
    const std::string text = item.Scalar();
    const size_t slash = text.find('/');
    std::optional<NamePattern> node, service;
    if (slash != std::string::npos && text.find('/', slash + 1) == std::string::npos) {
      node = parseNamePattern(std::string_view(text).substr(0, slash));
      service = parseNamePattern(std::string_view(text).substr(slash + 1));
    }
    if (node && service)
      out.push_back({*node, *service});
    else
      map.sink().add(item.Mark(), where + ": '" + text + "' is not NODE/SERVICE, each " +
                                      std::string(kPatternRule));
  }
  return out;
}

// Reads a list of rule mappings at `key`; `readRule` reads one.
template <typename Rule, typename ReadRule>
std::optional<std::vector<Rule>> readRules(const FieldMap& policy, std::string_view key,
                                           std::span<const std::string_view> allowed,
                                           ReadRule readRule) {
  if (!policy.has(key)) return std::nullopt;
  std::vector<Rule> rules;
  const YAML::Node list = policy.value(key);
  if (!list.IsSequence()) {
    policy.report(key, "expected a list of rules, got " + describeNodeType(list));
    return rules;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = policy.pathOf(key) + "[" + std::to_string(i) + "]";
    if (!list[i].IsMap()) {
      policy.sink().add(list[i].Mark(),
                        path + ": expected a mapping (a rule), got " + describeNodeType(list[i]));
      continue;
    }
    const FieldMap rule(list[i], path, allowed, policy.sink());
    rules.push_back(readRule(rule));
  }
  return rules;
}

}  // namespace

void readLocalPolicy(const FieldMap& top, std::optional<LocalPolicy>& out) {
  if (!top.has("local_policy")) return;
  const YAML::Node node = top.value("local_policy");
  if (!node.IsMap()) {
    top.report("local_policy",
               "expected a mapping with connect, register, send, publish and/or subscribe, got " +
                   describeNodeType(node) + " (remove the key for no policy)");
    return;
  }
  const FieldMap policy(node, "local_policy", kPolicyKeys, top.sink());
  LocalPolicy p;
  if (policy.has("connect")) {
    const YAML::Node connect = policy.value("connect");
    if (!connect.IsMap()) {
      policy.report("connect", "expected a mapping with users and/or groups, got " +
                                   describeNodeType(connect));
    } else {
      p.connect =
          readPrincipals(FieldMap(connect, "local_policy.connect", kConnectKeys, top.sink()),
                         /*required=*/true);
    }
  }
  p.registerRules =
      readRules<RegisterRule>(policy, "register", kRegisterRuleKeys, [](const FieldMap& rule) {
        RegisterRule r;
        r.services = readServicePatterns(rule);
        r.who = readPrincipals(rule, /*required=*/true);
        return r;
      });
  p.sendRules = readRules<SendRule>(policy, "send", kSendRuleKeys, [](const FieldMap& rule) {
    SendRule r;
    r.destinations = readDestinationPatterns(rule);
    r.who = readPrincipals(rule, /*required=*/true);
    return r;
  });
  const auto readSubjectRule = [](const FieldMap& rule) {
    SubjectRule r;
    r.subjects = readSubjectPatterns(rule);
    r.who = readPrincipals(rule, /*required=*/true);
    return r;
  };
  p.publishRules = readRules<SubjectRule>(policy, "publish", kSubjectRuleKeys, readSubjectRule);
  p.subscribeRules = readRules<SubjectRule>(policy, "subscribe", kSubjectRuleKeys, readSubjectRule);
  out = std::move(p);
}

}  // namespace detail
}  // namespace rdmamsg::config
