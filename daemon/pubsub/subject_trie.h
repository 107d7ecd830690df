// SubjectTrie<T>: values filed under subscription patterns, found by the
// subjects they match (common/subject.h) — NATS's sublist: one node per
// token, a literal child per token text, one child for `*`, and the
// values of patterns ending in `>` kept at the node before it. A match
// walks the subject's tokens once, visiting only the literal child of
// each token and the `*` child: its cost grows with the subject's length
// and the patterns that match, never with the patterns that do not.
//
// A value is filed once per insert(); erase() takes one filing back. The
// caller keeps values unique where it needs them unique.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/subject.h"

namespace rdmamsg::pubsub {

template <typename T>
class SubjectTrie {
 public:
  // Files `value` under `pattern` (valid: subject::checkPattern).
  void insert(std::string_view pattern, const T& value) {
    std::string_view tokens[subject::kMaxTokens];
    const size_t n = subject::tokenize(pattern, tokens);
    Node* node = &root_;
    for (size_t i = 0; i < n; i++) {
      if (tokens[i] == ">") {
        node->rest.push_back(value);
        ++size_;
        return;
      }
      node = &node->child(tokens[i]);
    }
    node->exact.push_back(value);
    ++size_;
  }

  // Takes back one filing of `value` under `pattern`; false when there is none.
  bool erase(std::string_view pattern, const T& value) {
    std::string_view tokens[subject::kMaxTokens];
    const size_t n = subject::tokenize(pattern, tokens);
    if (!eraseFrom(root_, tokens, n, 0, value)) return false;
    --size_;
    return true;
  }

  // Calls f(value) for every value filed under a pattern that `s` (a
  // valid subject) matches.
  template <typename F>
  void match(std::string_view s, F&& f) const {
    std::string_view tokens[subject::kMaxTokens];
    const size_t n = subject::tokenize(s, tokens);
    matchFrom(root_, tokens, n, 0, f);
  }

  // Values filed.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct Node {
    std::unordered_map<std::string, std::unique_ptr<Node>, Hash, std::equal_to<>> literal;
    std::unique_ptr<Node> star;  // the `*` child
    std::vector<T> exact;        // patterns that end at this node
    std::vector<T> rest;         // patterns that end with `>` after this node

    Node& child(std::string_view token) {
      std::unique_ptr<Node>* slot;
      if (token == "*") {
        slot = &star;
      } else {
        auto it = literal.find(token);
        if (it == literal.end()) it = literal.emplace(std::string(token), nullptr).first;
        slot = &it->second;
      }
      if (!*slot) *slot = std::make_unique<Node>();
      return **slot;
    }
    bool unused() const { return literal.empty() && !star && exact.empty() && rest.empty(); }
  };

  static bool take(std::vector<T>& values, const T& value) {
    for (size_t i = 0; i < values.size(); i++) {
      if (!(values[i] == value)) continue;
      values[i] = std::move(values.back());
      values.pop_back();
      return true;
    }
    return false;
  }

  // Erases below `node` and prunes the nodes left unused on the way back.
  static bool eraseFrom(Node& node, const std::string_view* tokens, size_t n, size_t i,
                        const T& value) {
    if (i == n) return take(node.exact, value);
    if (tokens[i] == ">") return take(node.rest, value);
    std::unique_ptr<Node>* slot = nullptr;
    if (tokens[i] == "*") {
      slot = &node.star;
    } else if (auto it = node.literal.find(tokens[i]); it != node.literal.end()) {
      slot = &it->second;
    }
    if (slot == nullptr || !*slot) return false;
    if (!eraseFrom(**slot, tokens, n, i + 1, value)) return false;
    if ((*slot)->unused()) {
      if (tokens[i] == "*")
        node.star.reset();
      else
        node.literal.erase(node.literal.find(tokens[i]));
    }
    return true;
  }

  template <typename F>
  static void matchFrom(const Node& node, const std::string_view* tokens, size_t n, size_t i,
                        F& f) {
    if (i == n) {
      for (const T& v : node.exact)
        f(v);
      return;
    }
    for (const T& v : node.rest)  // `>` matches the one or more tokens left
      f(v);
    if (auto it = node.literal.find(tokens[i]); it != node.literal.end())
      matchFrom(*it->second, tokens, n, i + 1, f);
    if (node.star) matchFrom(*node.star, tokens, n, i + 1, f);
  }

  Node root_;
  size_t size_ = 0;
};

}  // namespace rdmamsg::pubsub
