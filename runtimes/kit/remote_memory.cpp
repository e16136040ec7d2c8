#include "runtimes/kit/remote_memory.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace bpfprof {

namespace {

// A string is read in pieces that never cross a page: the page after a short name may be
// unmapped, and process_vm_readv fails a read that touches it.
constexpr uint64_t kPage = 4096;
constexpr uint64_t kStringPiece = 64;

bool printable(char c) { return c >= 0x20 && c <= 0x7e; }

}  // namespace

bool ProcessMemory::read(uint64_t address, void* out, size_t size) {
  if (!size) return true;
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  const ssize_t got = process_vm_readv(pid_.value, &local, 1, &remote, 1, 0);
  gone_ = gone_ || (got < 0 && errno == ESRCH);
  return got == static_cast<ssize_t>(size);
}

BatchRead RemoteMemory::read_batch(const std::vector<MemoryPiece>& pieces) {
  BatchRead batch{std::vector<bool>(pieces.size(), false)};
  for (size_t i = 0; i < pieces.size() && read(pieces[i].address, pieces[i].out, pieces[i].size);
       ++i)
    batch.read[i] = true;
  return batch;
}

// The kernel stops at the first piece it cannot read (transfers are whole iovec elements).
BatchRead ProcessMemory::read_batch(const std::vector<MemoryPiece>& pieces) {
  BatchRead batch{std::vector<bool>(pieces.size(), false)};
  if (pieces.empty()) return batch;
  std::vector<iovec> local, remote;
  for (const MemoryPiece& p : pieces) {
    local.push_back({p.out, p.size});
    remote.push_back({reinterpret_cast<void*>(p.address), p.size});
  }
  errno = 0;
  ssize_t got =
      process_vm_readv(pid_.value, local.data(), local.size(), remote.data(), remote.size(), 0);
  batch.process_gone = got < 0 && errno == ESRCH;
  gone_ = gone_ || batch.process_gone;
  for (size_t i = 0; i < pieces.size() && got >= static_cast<ssize_t>(pieces[i].size); ++i) {
    batch.read[i] = true;
    got -= static_cast<ssize_t>(pieces[i].size);
  }
  return batch;
}

void BufferMemory::place(uint64_t address, std::string bytes) {
  regions_[address] = std::move(bytes);
}

bool BufferMemory::read(uint64_t address, void* out, size_t size) {
  auto it = regions_.upper_bound(address);
  if (it == regions_.begin()) return false;
  --it;
  const uint64_t offset = address - it->first;
  if (offset > it->second.size() || size > it->second.size() - offset) return false;
  if (size) memcpy(out, it->second.data() + offset, size);
  return true;
}

std::string_view read_failure_name(ReadFailure failure) {
  switch (failure) {
    case ReadFailure::kUnreadable:
      return "memory unreadable";
    case ReadFailure::kBudgetUsed:
      return "read budget used up";
    case ReadFailure::kNotText:
      return "not a name (too long or not printable)";
    case ReadFailure::kNullPointer:
      return "null pointer";
  }
  return "?";
}

bool RemoteReader::fail(ReadFailure failure) {
  failure_ = failure;
  return false;
}

bool RemoteReader::read(uint64_t address, void* out, size_t size) {
  if (!address) return fail(ReadFailure::kNullPointer);
  if (size > budget_ - used_) return fail(ReadFailure::kBudgetUsed);
  used_ += size;
  if (address > UINT64_MAX - size || !memory_.read(address, out, size))
    return fail(ReadFailure::kUnreadable);
  return true;
}

BatchRead RemoteReader::read_batch(const std::vector<MemoryPiece>& pieces) {
  uint64_t size = 0;
  for (const MemoryPiece& p : pieces) size += p.size;
  if (size > budget_ - used_) {
    fail(ReadFailure::kBudgetUsed);
    return BatchRead{std::vector<bool>(pieces.size(), false)};
  }
  used_ += size;
  return memory_.read_batch(pieces);
}

std::optional<uint64_t> RemoteReader::word(uint64_t address) { return value<uint64_t>(address); }

std::optional<std::string> RemoteReader::c_string(uint64_t address) {
  if (auto known = strings_.find(address); known != strings_.end()) return known->second;
  std::string text;
  char piece[kStringPiece] = {};
  uint64_t at = address;
  while (text.size() < max_string_) {
    const uint64_t to_page_end = kPage - at % kPage;
    const size_t size = static_cast<size_t>(
        std::min<uint64_t>({kStringPiece, to_page_end, max_string_ - text.size()}));
    if (!read(at, piece, size)) return std::nullopt;
    const char* nul = static_cast<const char*>(memchr(piece, '\0', size));
    const size_t length = nul ? static_cast<size_t>(nul - piece) : size;
    if (!std::all_of(piece, piece + length, printable)) break;
    text.append(piece, length);
    if (nul) return strings_.emplace(address, std::move(text)).first->second;
    at += size;
  }
  fail(ReadFailure::kNotText);
  return std::nullopt;
}

}  // namespace bpfprof
