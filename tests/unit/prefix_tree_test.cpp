#include <gtest/gtest.h>

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

TEST(PrefixTree, GrowsWithUniqueStacksNotWithRepeats) {
  Tree tree;
  for (int repeat = 0; repeat < 10000; ++repeat)
    tree.intern_path(std::vector<uint64_t>{1, 2, 3, 4, 5});
  EXPECT_EQ(tree.size(), 5u);
}

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
