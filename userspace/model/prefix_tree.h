// A tree of stacks stored as (parent, key) nodes, each distinct path interned once, so
// memory grows with the number of unique stacks, not with the number of samples. Nodes are
// numbered in creation order, so a parent always has a smaller index than its children
// (the order the Firefox Profiler's stack table requires).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <limits>
#include <unordered_map>
#include <vector>

namespace bpfprof {

template <typename Key, typename KeyHash = std::hash<Key>>
class PrefixTree {
 public:
  using NodeId = uint32_t;
  static constexpr NodeId kRoot = std::numeric_limits<NodeId>::max();  // the empty stack

  struct Node {
    NodeId parent;
    Key key;
  };

  NodeId intern(NodeId parent, const Key& key) {
    auto [it, inserted] = index_.try_emplace(Edge{parent, key}, static_cast<NodeId>(nodes_.size()));
    if (inserted) nodes_.push_back(Node{parent, key});
    return it->second;
  }

  // Interns a whole path given from the root to the leaf. A path seen before is found by
  // one hash of the whole path (and a walk up the tree to confirm it), not one lookup per
  // frame: samples repeat the same stacks over and over.
  template <typename Range>
  NodeId intern_path(const Range& root_to_leaf) {
    size_t hash = 0x84222325cbf29ce4ull;
    size_t length = 0;
    for (const Key& key : root_to_leaf) {
      hash = (hash ^ KeyHash{}(key)) * 0x100000001b3ull;
      hash ^= hash >> 29;
      ++length;
    }
    if (length == 0) return kRoot;
    const size_t mask = path_slots_.size() - 1;
    size_t i = hash & mask;
    if (!path_slots_.empty()) {
      for (; path_slots_[i].leaf != kRoot; i = (i + 1) & mask)
        if (path_slots_[i].hash == hash && path_equals(path_slots_[i].leaf, root_to_leaf, length))
          return path_slots_[i].leaf;
    }
    NodeId node = kRoot;
    for (const Key& key : root_to_leaf) node = intern(node, key);
    add_path(hash, node);
    return node;
  }

  // The last path interned through it, with each of its prefixes' node: a thread's next
  // stack mostly shares all but its last frames with its last one, and is interned from where
  // the two part (a lookup per frame that differs, no hash of the whole path). Valid for the
  // tree that filled it only.
  struct RecentPath {
    uint64_t tree = 0;
    std::vector<Key> keys;      // root first
    std::vector<NodeId> nodes;  // nodes[i]: the path keys[0..i]
  };

  // As intern_path(root_to_leaf), from the part it shares with `recent`, which it then holds.
  NodeId intern_path(const std::vector<Key>& root_to_leaf, RecentPath& recent) {
    if (recent.tree != identity_.value) recent = RecentPath{identity_.value, {}, {}};
    const size_t shared =
        static_cast<size_t>(std::mismatch(recent.keys.begin(), recent.keys.end(),
                                          root_to_leaf.begin(), root_to_leaf.end())
                                .first -
                            recent.keys.begin());
    recent.keys.resize(shared);
    recent.nodes.resize(shared);
    NodeId node = shared ? recent.nodes.back() : kRoot;
    for (size_t i = shared; i < root_to_leaf.size(); ++i) {
      node = intern(node, root_to_leaf[i]);
      recent.keys.push_back(root_to_leaf[i]);
      recent.nodes.push_back(node);
    }
    return node;
  }

  const Node& node(NodeId id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  const std::vector<Node>& nodes() const { return nodes_; }

  // Interns the path that ends at `id` in `other` (kRoot: the empty path), to move the stacks
  // still in use into a new tree.
  NodeId copy_path(const PrefixTree& other, NodeId id) {
    if (id == kRoot) return kRoot;
    std::vector<Key> keys = other.leaf_to_root(id);
    std::reverse(keys.begin(), keys.end());
    return intern_path(keys);
  }

  // The keys from the leaf `id` up to the root.
  std::vector<Key> leaf_to_root(NodeId id) const {
    std::vector<Key> keys;
    for (NodeId n = id; n != kRoot; n = nodes_[n].parent) keys.push_back(nodes_[n].key);
    return keys;
  }

 private:
  struct Edge {
    NodeId parent;
    Key key;
    bool operator==(const Edge&) const = default;
  };
  struct EdgeHash {
    size_t operator()(const Edge& e) const noexcept {
      size_t h = KeyHash{}(e.key);
      return h ^ (static_cast<size_t>(e.parent) * 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2));
    }
  };

  // The whole-path index: open addressing (linear probing) in a power-of-two table kept at
  // most 3/4 full; an empty slot's leaf is kRoot (the empty path is never indexed).
  struct PathSlot {
    size_t hash = 0;
    NodeId leaf = kRoot;
  };
  void add_path(size_t hash, NodeId leaf) {
    if ((paths_ + 1) * 4 > path_slots_.size() * 3) {
      std::vector<PathSlot> old = std::move(path_slots_);
      path_slots_.assign(std::max<size_t>(64, old.size() * 2), PathSlot{});
      for (const PathSlot& slot : old)
        if (slot.leaf != kRoot) place(slot);
    }
    place(PathSlot{hash, leaf});
    ++paths_;
  }
  void place(const PathSlot& slot) {
    const size_t mask = path_slots_.size() - 1;
    size_t i = slot.hash & mask;
    while (path_slots_[i].leaf != kRoot) i = (i + 1) & mask;
    path_slots_[i] = slot;
  }

  template <typename Range>
  bool path_equals(NodeId leaf, const Range& root_to_leaf, size_t length) const {
    // Compares from the leaf up: paths that differ usually differ near their leaves.
    auto key = std::end(root_to_leaf);
    NodeId n = leaf;
    for (size_t i = 0; i < length; ++i, n = nodes_[n].parent) {
      if (n == kRoot || !(nodes_[n].key == *--key)) return false;
    }
    return n == kRoot;
  }

  // A number no other tree has had, for RecentPath: a copy gets a new one, and so does a tree
  // moved from (it is empty then).
  struct Identity {
    uint64_t value = next();
    Identity() = default;
    Identity(const Identity&) : value(next()) {}
    Identity(Identity&& other) noexcept : value(other.value) { other.value = next(); }
    Identity& operator=(const Identity&) {
      value = next();
      return *this;
    }
    Identity& operator=(Identity&& other) noexcept {
      value = other.value;
      other.value = next();
      return *this;
    }
    static uint64_t next() {
      static std::atomic<uint64_t> count{1};
      return count++;
    }
  };

  Identity identity_;
  std::vector<Node> nodes_;
  std::unordered_map<Edge, NodeId, EdgeHash> index_;
  std::vector<PathSlot> path_slots_;  // whole-path hash -> leaf
  size_t paths_ = 0;
};

}  // namespace bpfprof
