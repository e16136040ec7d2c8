#include "symbols/dwarf/unwinder.h"

#include <dwarf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "bpf/unwind_table.h"
#include "symbols/dwarf/crt_stubs.h"
#include "symbols/dwarf/dwarf_module.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/held_file.h"
#include "symbols/util/mapping_kind.h"
#include "symbols/util/unique_handle.h"

namespace bpfprof {

namespace {

// A frame without CFI whose rule is known here, where libdwfl stops: in a crt stub, or a leaf
// that has pushed nothing (clone's parent). Its CFA is sp + cfa_offset; its registers.
struct StubFrame {
  uint32_t cfa_offset = 8;
  UserRegisters registers;
  uint32_t known = 0;  // one bit per DWARF register number
};

constexpr uint32_t kAllRegisters = (uint32_t{1} << UserRegisters::kCount) - 1;

// What libdwfl's callbacks read during one unwind.
struct CurrentSample {
  int tid = 0;
  UserRegisters registers;  // where the walk starts
  uint32_t known = kAllRegisters;
  uint64_t stack_base = 0;  // the sp the copy was taken at
  const uint8_t* stack = nullptr;
  size_t stack_size = 0;
  std::vector<uint64_t>* pcs = nullptr;
  size_t max_frames = 0;
  uint64_t stack_bytes_needed = 0;  // see UnwoundStack
  const std::vector<CrtStub>* crt_stubs = nullptr;
  Dwfl* dwfl = nullptr;           // the session's: whether CFI covers a stub after all
  bool skip_first_frame = false;  // a walk on from a stub's caller, already collected
  std::optional<StubFrame> stub_stop;
};

pid_t next_thread(Dwfl*, void* arg, void** thread_arg) {
  auto* sample = static_cast<CurrentSample*>(arg);
  if (*thread_arg) return 0;  // one thread: the sampled one
  *thread_arg = arg;
  return sample->tid;
}

bool get_thread(Dwfl*, pid_t, void* arg, void** thread_arg) {
  *thread_arg = arg;
  return true;
}

// Stack memory comes from the copy taken with the sample; nothing else is readable.
bool read_stack(CurrentSample* sample, uint64_t address, uint64_t* result) {
  const uint64_t sp = sample->stack_base;
  // Written without sums that can wrap around (found by tests/fuzz: an sp near 2^64).
  if (address < sp) return false;
  if (address - sp > sample->stack_size ||
      sample->stack_size - (address - sp) < sizeof(Dwarf_Word)) {
    if (address - sp < (uint64_t{1} << 32))  // a plausible stack distance, not junk
      sample->stack_bytes_needed =
          std::max<uint64_t>(sample->stack_bytes_needed, address - sp + sizeof(Dwarf_Word));
    return false;
  }
  memcpy(result, sample->stack + (address - sp), sizeof(Dwarf_Word));
  return true;
}

bool memory_read(Dwfl*, Dwarf_Addr address, Dwarf_Word* result, void* arg) {
  static_assert(sizeof(Dwarf_Word) == sizeof(uint64_t));
  return read_stack(static_cast<CurrentSample*>(arg), address, result);
}

// Registers a frame did not recover (a caller-saved one) are left undefined for libdwfl.
bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) {
  auto* sample = static_cast<CurrentSample*>(thread_arg);
  const UserRegisters& r = sample->registers;
  dwfl_thread_state_register_pc(thread, r.ip());
  if (sample->known == kAllRegisters)
    return dwfl_thread_state_registers(thread, 0, UserRegisters::kCount, r.dwarf.data());
  for (int regno = 0; regno < UserRegisters::kCount; ++regno) {
    if ((sample->known >> regno & 1) != 0 &&
        !dwfl_thread_state_registers(thread, regno, 1, &r.dwarf[regno]))
      return false;
  }
  return true;
}

// Whether the call-frame information of `module` (.eh_frame, else .debug_frame) has a row
// for `pc`.
bool cfi_covers(Dwfl_Module* module, uint64_t pc) {
  for (bool eh : {true, false}) {
    Dwarf_Addr bias = 0;
    Dwarf_CFI* cfi = eh ? dwfl_module_eh_cfi(module, &bias) : dwfl_module_dwarf_cfi(module, &bias);
    Dwarf_Frame* frame = nullptr;
    if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &frame) == 0) {
      free(frame);
      return true;
    }
  }
  return false;
}

// The `size` bytes of code at `address` of a module of the session; fewer if they are not
// all in one of its sections.
std::vector<uint8_t> code_at(Dwfl* dwfl, uint64_t address, size_t size) {
  Dwfl_Module* module = dwfl_addrmodule(dwfl, address);
  Dwarf_Addr bias = 0;
  Elf* elf = module != nullptr ? dwfl_module_getelf(module, &bias) : nullptr;
  if (elf == nullptr || address < bias) return {};
  return read_code_bytes(elf, address - bias, size);
}

// Whether the instruction before `pc` is `syscall` (0f 05). For a leaf that no CFI covers: a
// thread in a system call made as the last instruction of its FDE, as glibc's __restore_rt
// makes rt_sigreturn (which never returns there): a signal storm's samples are often there.
bool follows_syscall(Dwfl* dwfl, uint64_t pc) {
  if (pc < 2) return false;
  const std::vector<uint8_t> code = code_at(dwfl, pc - 2, 2);
  return code.size() == 2 && code[0] == 0x0f && code[1] == 0x05;
}

// Whether a leaf that no CFI covers is a child just out of glibc's clone or clone3: its new
// stack holds no caller (what lies there is a reused stack's old frames), as the kernel walk
// decides from the same bytes and rax.
bool starts_in_clone_child(Dwfl_Module* module, const UserRegisters& registers) {
  if (registers.ax() != 0) return false;
  Dwarf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(module, &bias);
  return registers.ip() >= bias && is_clone_child_start(elf, registers.ip() - bias);
}

// Whether a leaf without a rule (no CFI at its pc, nor at the syscall instruction before it)
// has pushed nothing: the word at sp is a return address, just past a call in a module. So
// glibc's clone and clone3 are left in the parent (their CFI ends before the syscall), as
// the kernel walk steps them (leaf_step_without_rule). Not in a crt stub, whose own rule goes
// on (collect_frame).
bool leaf_pushed_nothing(CurrentSample& sample, const UserRegisters& registers) {
  if (find_crt_stub(*sample.crt_stubs, registers.ip()) != nullptr) return false;
  uint64_t return_address = 0;
  if (!read_stack(&sample, registers.sp(), &return_address) || return_address < 8) return false;
  const std::vector<uint8_t> code = code_at(sample.dwfl, return_address - 8, 8);
  return code.size() == 8 && bpfprof_follows_call(code.data());
}

// A crt stub holding `pc` whose module has no CFI for it (where it has, libdwfl walks on).
const CrtStub* stub_without_cfi(const CurrentSample& sample, uint64_t pc) {
  const CrtStub* stub = find_crt_stub(*sample.crt_stubs, pc);
  if (stub == nullptr) return nullptr;
  Dwfl_Module* module = dwfl_addrmodule(sample.dwfl, pc);
  return module != nullptr && cfi_covers(module, pc) ? nullptr : stub;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {next_thread,           get_thread, memory_read,
                                                set_initial_registers, nullptr,    nullptr};

// Profiles nudge every frame but the leaf back by one byte, into its call instruction. A
// frame interrupted by a signal holds an exact pc, and so does the signal trampoline the
// handler returns to: those get one byte more so the nudge lands on them.
int collect_frame(Dwfl_Frame* frame, void* arg) {
  auto* sample = static_cast<CurrentSample*>(arg);
  Dwarf_Addr pc;
  bool activation;
  if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
  if (sample->skip_first_frame) {
    sample->skip_first_frame = false;
    return DWARF_CB_OK;
  }
  std::vector<uint64_t>& pcs = *sample->pcs;
  if (activation && !pcs.empty()) {
    pcs.back() += 1;  // the trampoline
    pc += 1;          // the interrupted instruction
  }
  pcs.push_back(pc);
  if (pcs.size() >= sample->max_frames) return DWARF_CB_ABORT;
  // In a crt stub libdwfl has no CFI and would guess from rbp: the stub's rule goes on.
  const uint64_t lookup_pc = pcs.size() == 1 || activation ? pc : pc - 1;
  if (const CrtStub* stub = stub_without_cfi(*sample, lookup_pc)) {
    StubFrame stop{stub->cfa_offset_at(lookup_pc), {}, 0};
    for (int regno = 0; regno < UserRegisters::kCount; ++regno) {
      if (dwfl_frame_reg(frame, regno, &stop.registers.dwarf[regno]) == 0)
        stop.known |= uint32_t{1} << regno;
    }
    sample->stub_stop = stop;
    return DWARF_CB_ABORT;
  }
  return DWARF_CB_OK;
}

// Steps from the frame where a walk stopped in a crt stub to its caller, by the stub's rule,
// and has libdwfl walk on from there. False when the caller's return address is not readable.
bool walk_past_stub(Dwfl* dwfl, CurrentSample& sample) {
  const StubFrame stop = *sample.stub_stop;
  sample.stub_stop.reset();
  if ((stop.known >> UserRegisters::kSp & 1) == 0) return false;
  const uint64_t cfa = stop.registers.sp() + stop.cfa_offset;
  uint64_t return_address = 0;
  if (!read_stack(&sample, cfa - 8, &return_address) || return_address == 0) return false;
  sample.pcs->push_back(return_address);
  if (sample.pcs->size() >= sample.max_frames) return true;
  // The caller starts in its call instruction, whose rules hold at the return address too.
  sample.registers = stop.registers;
  sample.registers.dwarf[UserRegisters::kSp] = cfa;
  sample.registers.dwarf[UserRegisters::kIp] = return_address - 1;
  sample.known = stop.known | uint32_t{1} << UserRegisters::kIp;
  sample.skip_first_frame = true;
  dwfl_getthread_frames(dwfl, sample.tid, collect_frame, &sample);
  return true;
}

// Unwinding needs call-frame information, which .eh_frame in the mapped file itself has
// almost always; a separate debug file (for .debug_frame) is looked for only when it does
// not: opening a debug file as large as libc's costs the recorder far more than the unwind.
int find_debuginfo_without_eh_frame(Dwfl_Module* module, void** /*userdata*/,
                                    const char* /*module_name*/, Dwarf_Addr /*base*/,
                                    const char* file_name, const char* debuglink_file,
                                    GElf_Word debuglink_crc, char** debuginfo_file_name) {
  Dwarf_Addr bias = 0;
  if (Elf* elf = dwfl_module_getelf(module, &bias)) {
    size_t section_names = 0;
    if (elf_getshdrstrndx(elf, &section_names) == 0) {
      for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr header;
        if (!gelf_getshdr(scn, &header)) continue;
        const char* name = elf_strptr(elf, section_names, header.sh_name);
        if (name && strcmp(name, ".eh_frame") == 0 && header.sh_type != SHT_NOBITS) return -1;
      }
    }
  }
  return find_debug_file(module, {}, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
}

// The crt stubs of a session's modules, in process addresses. Whether CFI covers one after
// all is asked only when a walk reaches it (stub_without_cfi), not for every module here.
std::vector<CrtStub> crt_stubs_of(Dwfl* dwfl) {
  std::vector<CrtStub> stubs;
  auto add_module = [](Dwfl_Module* module, void**, const char*, Dwarf_Addr, void* arg) -> int {
    auto& all = *static_cast<std::vector<CrtStub>*>(arg);
    Dwarf_Addr bias = 0;
    if (Elf* elf = dwfl_module_getelf(module, &bias))
      for (const CrtStub& stub : find_crt_stubs(elf))
        all.push_back({stub.start + bias, stub.body + bias, stub.ret + bias, stub.end + bias});
    return DWARF_CB_OK;
  };
  dwfl_getmodules(dwfl, add_module, &stubs, 0);
  std::sort(stubs.begin(), stubs.end(),
            [](const CrtStub& a, const CrtStub& b) { return a.start < b.start; });
  return stubs;
}

// Each session holds its files open and mapped (~2 fds and ~0.3 MB of mapped pages per
// process): only the most recently used are kept, or a recording of thousands of short
// processes would run out of fds and memory.
// An evicted session is rebuilt if its process is sampled again.
constexpr size_t kMaxSessions = 128;

}  // namespace

// Found once per version of the file: every forked child needs a session of its own, and
// opening each of its files again (ELF headers, symbols) would be most of the recorder's CPU
// in a fork storm.
std::optional<uint64_t> DwarfUnwinder::vaddr_of_file_offset(const std::string& file,
                                                            uint64_t file_offset) {
  std::map<FileVersionOffset, uint64_t>& cache = vaddr_cache_;
  struct stat status;
  if (stat(file.c_str(), &status) != 0) return std::nullopt;
  FileVersionOffset key{file,           status.st_dev,         status.st_ino,
                        status.st_size, status.st_mtim.tv_sec, status.st_mtim.tv_nsec,
                        file_offset};
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  std::string error;
  std::unique_ptr<ElfFile> elf = ElfFile::open(file, &error, ElfContents::kLayout);
  std::optional<uint64_t> vaddr = elf ? elf->file_offset_to_vaddr(file_offset) : std::nullopt;
  if (!vaddr) return std::nullopt;          // not cached: it may be readable later
  if (cache.size() >= 4096) cache.clear();  // bounded; files seen again are read again
  cache.emplace(std::move(key), *vaddr);
  return vaddr;
}

// A libdwfl session for one process: its modules reported once, its state attached with
// callbacks that read the current sample.
struct DwarfUnwinder::Process {
  Dwfl_Callbacks callbacks{};
  Dwfl* dwfl = nullptr;
  CurrentSample current;
  std::vector<CrtStub> crt_stubs;  // in process addresses, sorted
  bool attached = false;
  uint64_t last_use = 0;

  ~Process() {
    if (dwfl) dwfl_end(dwfl);
  }
};

DwarfUnwinder::DwarfUnwinder() = default;
DwarfUnwinder::~DwarfUnwinder() = default;

void DwarfUnwinder::add_mapping(int pid, uint64_t start, uint64_t end, uint64_t file_offset,
                                MappedFile file) {
  mappings_[pid].add(Mapping{start, end, file_offset, std::move(file)});
  sessions_.erase(pid);  // rebuilt with the new module on next use
}

void DwarfUnwinder::reset(int pid) {
  mappings_.erase(pid);
  sessions_.erase(pid);
}

void DwarfUnwinder::copy(int parent_pid, int child_pid) {
  // The child's own mappings (after its exec) may already be known when the fork is read.
  if (mappings_.contains(child_pid)) return;
  auto it = mappings_.find(parent_pid);
  if (it != mappings_.end()) mappings_[child_pid] = it->second;
  sessions_.erase(child_pid);
}

void DwarfUnwinder::remove(int pid) {
  mappings_.erase(pid);
  sessions_.erase(pid);
}

DwarfUnwinder::Process* DwarfUnwinder::session_for(int pid) {
  auto found = sessions_.find(pid);
  if (found != sessions_.end()) {
    found->second->last_use = ++session_uses_;
    return found->second.get();
  }
  auto maps = mappings_.find(pid);
  if (maps == mappings_.end()) return nullptr;
  if (sessions_.size() >= kMaxSessions) {
    auto least_recent = std::min_element(
        sessions_.begin(), sessions_.end(),
        [](const auto& a, const auto& b) { return a.second->last_use < b.second->last_use; });
    sessions_.erase(least_recent);
  }

  auto process = std::make_unique<Process>();
  process->callbacks.find_elf = dwfl_build_id_find_elf;
  process->callbacks.find_debuginfo = find_debuginfo_without_eh_frame;
  process->callbacks.section_address = dwfl_offline_section_address;
  process->dwfl = dwfl_begin(&process->callbacks);
  if (!process->dwfl) return nullptr;
  dwfl_report_begin(process->dwfl);
  std::set<std::string> reported;
  for (const auto& [start, mapping] : maps->second) {
    const MappingKind kind = classify_mapping(mapping.file.path);
    if (kind != MappingKind::kFile && kind != MappingKind::kVdso) continue;
    const std::string& file = mapping.file.readable_path();
    if (file.empty() || !reported.insert(file).second) continue;
    // The load bias: where the file's virtual address 0 is in this process.
    std::optional<uint64_t> vaddr = vaddr_of_file_offset(file, mapping.file_offset);
    if (!vaddr) continue;
    // A file libdwfl cannot use (not ELF, or overlapping one reported before) is left out,
    // and may be tried again through another of its mappings: frames in it are cut there,
    // and such stacks are shown truncated.
    UniqueFd fd = elf_descriptor_for_libdwfl(file);
    if (fd && dwfl_report_elf(process->dwfl, mapping.file.path.c_str(), file.c_str(), fd.get(),
                              start - *vaddr, false)) {
      fd.release();  // libdwfl keeps the descriptor of a module it accepts
    } else {
      reported.erase(file);
    }
  }
  dwfl_report_end(process->dwfl, nullptr, nullptr);
  process->crt_stubs = crt_stubs_of(process->dwfl);
  process->attached =
      dwfl_attach_state(process->dwfl, nullptr, pid, &kThreadCallbacks, &process->current);
  if (!process->attached) return nullptr;
  process->last_use = ++session_uses_;
  return sessions_.emplace(pid, std::move(process)).first->second.get();
}

UnwoundStack DwarfUnwinder::unwind(int pid, int tid, const UserRegisters& registers,
                                   const uint8_t* stack, size_t stack_size, size_t max_frames) {
  UnwoundStack result;
  Process* process = session_for(pid);
  const uint64_t ip = registers.ip();
  Dwfl_Module* module =
      process != nullptr && ip != 0 ? dwfl_addrmodule(process->dwfl, ip) : nullptr;
  // Where libdwfl has no CFI for the leaf, the rules below (the kernel walk's) go first.
  const bool leaf_without_cfi = module != nullptr && !cfi_covers(module, ip);
  if (!process || ip == 0 || (leaf_without_cfi && starts_in_clone_child(module, registers))) {
    if (ip) result.pcs.push_back(ip);
    return result;
  }
  // A leaf past its FDE's end, in a system call: unwound from the syscall instruction, whose
  // rules are the pc's (it moves no register they use), and shown at its own pc.
  UserRegisters start = registers;
  const bool syscall_leaf = leaf_without_cfi && follows_syscall(process->dwfl, ip);
  if (syscall_leaf) start.dwarf[UserRegisters::kIp] -= 1;
  const bool leaf_without_rule = leaf_without_cfi && (!syscall_leaf || !cfi_covers(module, ip - 1));
  CurrentSample& current = process->current;
  current = CurrentSample{};
  current.tid = tid;
  current.registers = start;
  current.stack_base = registers.sp();
  current.stack = stack;
  current.stack_size = stack_size;
  current.pcs = &result.pcs;
  current.max_frames = max_frames;
  current.crt_stubs = &process->crt_stubs;
  current.dwfl = process->dwfl;
  if (leaf_without_rule && leaf_pushed_nothing(current, registers)) {
    result.pcs.push_back(registers.ip());
    current.stub_stop = StubFrame{8, registers, current.known};
  } else {
    dwfl_getthread_frames(process->dwfl, tid, collect_frame, &current);
  }
  // A stub's caller may be in a stub only if stubs call stubs, which they do not: bounded.
  for (int step = 0; step < 4 && current.stub_stop; ++step)
    if (!walk_past_stub(process->dwfl, current)) break;
  result.stack_bytes_needed = process->current.stack_bytes_needed;
  if (result.pcs.empty()) result.pcs.push_back(registers.ip());
  result.pcs.front() = registers.ip();
  return result;
}

}  // namespace bpfprof
