// A tree of stacks stored as (parent, key) nodes, each distinct path interned once, so
// memory grows with the number of unique stacks, not with the number of samples. Nodes are
// numbered in creation order, so a parent always has a smaller index than its children
// (the order the Firefox Profiler's stack table requires).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
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
    const size_t hash = edge_hash(parent, key);
    const NodeId found = edges_.find(
        hash, [&](NodeId n) { return nodes_[n].parent == parent && nodes_[n].key == key; });
    if (found != kRoot) return found;
    const auto id = static_cast<NodeId>(nodes_.size());
    nodes_.push_back(Node{parent, key});
    edges_.add(hash, id);
    return id;
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
    const NodeId seen =
        paths_.find(hash, [&](NodeId leaf) { return path_equals(leaf, root_to_leaf, length); });
    if (seen != kRoot) return seen;
    NodeId node = kRoot;
    for (const Key& key : root_to_leaf) node = intern(node, key);
    paths_.add(hash, node);
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
  static size_t edge_hash(NodeId parent, const Key& key) {
    size_t h = KeyHash{}(key) ^ (static_cast<size_t>(parent) * 0x9E3779B97F4A7C15ull);
    // Linear probing takes the low bits: mix the high ones in (KeyHash may be the identity).
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
  }

  // Node ids by a hash, in open addressing (linear probing) over a power-of-two table kept at
  // most 3/4 full; an empty slot holds kRoot. What a node stands for is compared by the
  // caller: its edge (parent and key), or its whole path. Node-based maps cost a cache miss
  // and an allocation a node: deep stacks intern thousands of nodes a sample.
  struct Slot {
    size_t hash = 0;
    NodeId node = kRoot;
  };
  struct SlotTable {
    std::vector<Slot> slots;
    size_t count = 0;

    // The node of the first slot with `hash` whose node `matches`, or kRoot.
    template <typename Matches>
    NodeId find(size_t hash, const Matches& matches) const {
      if (slots.empty()) return kRoot;
      const size_t mask = slots.size() - 1;
      for (size_t i = hash & mask; slots[i].node != kRoot; i = (i + 1) & mask)
        if (slots[i].hash == hash && matches(slots[i].node)) return slots[i].node;
      return kRoot;
    }
    void add(size_t hash, NodeId node) {
      if ((count + 1) * 4 > slots.size() * 3) {
        std::vector<Slot> old = std::move(slots);
        slots.assign(std::max<size_t>(64, old.size() * 2), Slot{});
        for (const Slot& slot : old)
          if (slot.node != kRoot) place(slot);
      }
      place(Slot{hash, node});
      ++count;
    }
    void place(const Slot& slot) {
      const size_t mask = slots.size() - 1;
      size_t i = slot.hash & mask;
      while (slots[i].node != kRoot) i = (i + 1) & mask;
      slots[i] = slot;
    }
  };

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
  SlotTable edges_;  // (parent, key) -> node
  SlotTable paths_;  // whole path -> leaf
};

}  // namespace bpfprof
