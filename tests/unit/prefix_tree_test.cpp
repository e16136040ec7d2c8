#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "userspace/model/prefix_tree.h"
#include "userspace/output/string_table.h"

namespace bpfprof {
namespace {

using Tree = PrefixTree<uint64_t>;

TEST(PrefixTree, SharedPrefixesAreStoredOnce) {
  Tree tree;
  Tree::NodeId abc = tree.intern_path(std::vector<uint64_t>{1, 2, 3});
  Tree::NodeId abd = tree.intern_path(std::vector<uint64_t>{1, 2, 4});
  EXPECT_NE(abc, abd);
  EXPECT_EQ(tree.size(), 4u);  // 1, 1>2, 1>2>3, 1>2>4
  EXPECT_EQ(tree.node(abc).parent, tree.node(abd).parent);
  EXPECT_EQ(tree.intern_path(std::vector<uint64_t>{1, 2, 3}), abc);
  EXPECT_EQ(tree.size(), 4u);
}

TEST(PrefixTree, SameKeyUnderDifferentParentsIsDistinct) {
  Tree tree;
  Tree::NodeId a = tree.intern_path(std::vector<uint64_t>{1, 9});
  Tree::NodeId b = tree.intern_path(std::vector<uint64_t>{2, 9});
  EXPECT_NE(a, b);
  EXPECT_EQ(tree.node(a).key, 9u);
  EXPECT_EQ(tree.node(b).key, 9u);
}

TEST(PrefixTree, ParentsComeBeforeChildren) {
  Tree tree;
  for (uint64_t i = 0; i < 50; ++i) tree.intern_path(std::vector<uint64_t>{i % 3, i % 7, i});
  for (Tree::NodeId i = 0; i < tree.size(); ++i) {
    Tree::NodeId parent = tree.node(i).parent;
    if (parent != Tree::kRoot) {
      EXPECT_LT(parent, i);
    }
  }
}

TEST(PrefixTree, LeafToRootWalksBack) {
  Tree tree;
  Tree::NodeId leaf = tree.intern_path(std::vector<uint64_t>{10, 20, 30});
  EXPECT_EQ(tree.leaf_to_root(leaf), (std::vector<uint64_t>{30, 20, 10}));
  EXPECT_TRUE(tree.leaf_to_root(Tree::kRoot).empty());
}

// Interning from a thread's last path gives the node the whole-path walk gives, for paths
// that share any part with the last one (nothing, a prefix, all of it, or more).
TEST(PrefixTree, RecentPathGivesTheSameNodes) {
  Tree hinted;
  Tree plain;
  Tree::RecentPath recent;
  uint64_t state = 12345;
  for (int i = 0; i < 5000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::vector<uint64_t> path;
    const size_t length = (state >> 33) % 12;
    for (size_t k = 0; k < length; ++k) path.push_back(k < 6 ? k : (state >> (20 + k)) % 3);
    const Tree::NodeId node = hinted.intern_path(path, recent);
    EXPECT_EQ(node, plain.intern_path(path));
    EXPECT_EQ(hinted.leaf_to_root(node), plain.leaf_to_root(node));
  }
  EXPECT_EQ(hinted.size(), plain.size());
}

// A hint names its tree: after the tree is replaced (moved away, emptied, copied) the old
// nodes are not used.
TEST(PrefixTree, RecentPathOfAnotherTreeIsNotUsed) {
  Tree tree;
  Tree::RecentPath recent;
  tree.intern_path(std::vector<uint64_t>{7, 8, 9}, recent);
  Tree moved = std::move(tree);
  tree = Tree{};
  const Tree::NodeId node = tree.intern_path(std::vector<uint64_t>{7, 8, 9, 10}, recent);
  EXPECT_EQ(tree.size(), 4u);
  EXPECT_EQ(tree.leaf_to_root(node), (std::vector<uint64_t>{10, 9, 8, 7}));
  Tree copy = tree;
  const Tree::NodeId in_copy = copy.intern_path(std::vector<uint64_t>{1, 9}, recent);
  EXPECT_EQ(copy.leaf_to_root(in_copy), (std::vector<uint64_t>{9, 1}));
  Tree::RecentPath from_moved;
  const Tree::NodeId first = moved.intern_path(std::vector<uint64_t>{7, 8}, from_moved);
  EXPECT_EQ(moved.leaf_to_root(first), (std::vector<uint64_t>{8, 7}));
  EXPECT_EQ(moved.size(), 3u);
}

TEST(PrefixTree, GrowsWithUniqueStacksNotWithRepeats) {
  Tree tree;
  for (int repeat = 0; repeat < 10000; ++repeat)
    tree.intern_path(std::vector<uint64_t>{1, 2, 3, 4, 5});
  EXPECT_EQ(tree.size(), 5u);
}

// The whole-path index is a hand-written open-addressing table: every path, over many
// growths, is found again as the node a frame-by-frame walk gives, also when every path has
// the same hash (with SameHashForAll, all paths of a length do: long probe chains, told
// apart by the walk up the tree).
template <typename Hash>
void check_paths_found_again(size_t count) {
  PrefixTree<uint64_t, Hash> tree;
  PrefixTree<uint64_t, Hash> by_frames;  // interned one frame at a time
  std::vector<std::vector<uint64_t>> paths;
  uint64_t seed = 42;
  for (size_t i = 0; i < count; ++i) {
    std::vector<uint64_t> path;
    const size_t length = 1 + i % 9;
    for (size_t j = 0; j < length; ++j) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      path.push_back((seed >> 33) % 7);  // few distinct keys: many shared prefixes
    }
    paths.push_back(path);
  }
  std::vector<typename PrefixTree<uint64_t, Hash>::NodeId> first;
  for (const auto& path : paths) first.push_back(tree.intern_path(path));
  const size_t nodes = tree.size();
  for (size_t i = 0; i < paths.size(); ++i) {
    ASSERT_EQ(tree.intern_path(paths[i]), first[i]) << i;
    auto node = PrefixTree<uint64_t, Hash>::kRoot;
    for (uint64_t key : paths[i]) node = by_frames.intern(node, key);
    std::vector<uint64_t> back = tree.leaf_to_root(first[i]);
    std::reverse(back.begin(), back.end());
    ASSERT_EQ(back, paths[i]) << i;
  }
  EXPECT_EQ(tree.size(), nodes);  // nothing new the second time
  EXPECT_EQ(by_frames.size(), nodes);
  EXPECT_EQ(tree.intern_path(std::vector<uint64_t>{}), (PrefixTree<uint64_t, Hash>::kRoot));
}

struct SameHashForAll {
  size_t operator()(uint64_t) const { return 7; }
};

TEST(PrefixTree, EveryPathIsFoundAgainAcrossGrowths) {
  check_paths_found_again<std::hash<uint64_t>>(100000);
}

TEST(PrefixTree, PathsWithOneHashAreToldApart) { check_paths_found_again<SameHashForAll>(2000); }

TEST(StringTable, InternsEachStringOnce) {
  StringTable table;
  StringIndex a = table.intern("main");
  StringIndex b = table.intern("inner_spin");
  EXPECT_EQ(table.intern("main"), a);
  EXPECT_NE(a, b);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.strings()[b.value], "inner_spin");
}

TEST(StringTable, KeepsArbitraryBytes) {
  StringTable table;
  std::string with_nul("a\0b", 3);
  StringIndex i = table.intern(with_nul);
  StringIndex j = table.intern("a");
  EXPECT_NE(i, j);
  EXPECT_EQ(table.strings()[i.value], with_nul);
  EXPECT_EQ(table.intern(std::string("\xff\xfe")), table.intern(std::string("\xff\xfe")));
}

}  // namespace
}  // namespace bpfprof
