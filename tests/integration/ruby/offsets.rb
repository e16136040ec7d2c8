# Checks bpfprof's layout table entry for this interpreter's version (runtimes/ruby/layout.h)
# against what the running interpreter shows of itself through Fiddle. Prints one line per
# field; exits 1 if any differs.  Usage: ruby offsets.rb PATH/TO/layout.h
require 'fiddle'
require 'tmpdir'

major, minor = RUBY_VERSION.split('.').map(&:to_i)
text = File.read(ARGV.fetch(0))[/kRuby#{major}#{minor}\{(.*?)\};/m, 1]
abort "no layout entry for ruby #{major}.#{minor}" unless text
L = text.scan(/\.(\w+) = (0x\h+|1u << \d+|\d+)/).to_h do |k, v|
  [k.to_sym, v.start_with?('0x') ? v.hex : v.include?('<<') ? 1 << v[/\d+$/].to_i : v.to_i]
end
LIB = Fiddle::Handle.new(File.basename(Dir['/proc/self/map_files/*'].map { |f| File.readlink(f) rescue '' }
                                         .find { |f| f =~ /libruby/ } || abort('no libruby mapped')))
RESULTS = {}

def check(name, ok) = RESULTS[name] = ok ? true : false
def word(address) = Fiddle::Pointer.new(address)[0, 8].unpack1('Q')
def u32(address) = Fiddle::Pointer.new(address)[0, 4].unpack1('L')
def flags(object) = word(object)

def string(value)
  f = flags(value)
  return nil unless f & L[:object_type_mask] == L[:type_string]
  if f & L[:string_no_embed] != 0
    Fiddle::Pointer.new(word(value + L[:string_pointer]))[0, word(value + L[:string_length])]
  else
    Fiddle::Pointer.new(value + L[:string_embedded])[0, (f >> L[:string_embed_length_shift]) & L[:string_embed_length_mask]]
  end
end

def path(value) # a String, or [path, realpath]
  return string(value) unless flags(value) & L[:object_type_mask] == L[:type_array]
  elements = flags(value) & L[:array_embed] != 0 ? value + L[:array_embedded] : word(value + L[:array_pointer])
  string(word(elements))
end

# The line of instruction `pos` (insns_info: positions, or the succinct index that replaces them).
def line_at(body, pos)
  entries = word(body + L[:body_insns_info])
  size = u32(body + L[:body_insns_info_size])
  positions = word(body + L[:body_insns_positions])
  index = if size == 1 then 0
          elsif positions != 0 then (0...size).select { |i| u32(positions + 4 * i) <= pos }.last
          else succinct_rank(word(body + L[:body_insns_succ_table]), pos) - 1
          end
  Fiddle::Pointer.new(entries + index * L[:insn_info_size])[0, 4].unpack1('l')
end

def succinct_rank(table, x)
  return (word(table + 8 * (x / 9)) >> (x % 9 * 7)) & 0x7f if x < 54
  block = table + 48 + (x - 54) / 512 * 80
  bit = (x - 54) % 512
  small = bit / 64
  small_rank = small.zero? ? 0 : (word(block + 8) >> ((small - 1) * 9)) & 0x1ff
  u32(block) + small_rank + ((word(block + 16 + 8 * small) << (63 - bit % 64)) & (2**64 - 1)).to_s(2).count('1')
end

def fs_base
  base = Fiddle::Pointer.malloc(8)
  Fiddle::Function.new(Fiddle::Handle::DEFAULT['syscall'], [Fiddle::TYPE_LONG] * 3, Fiddle::TYPE_LONG)
                  .call(158, 0x1003, base.to_i) # arch_prctl(ARCH_GET_FS)
  base[0, 8].unpack1('Q')
end

def iseq_of(method) = word(Fiddle.dlwrap(RubyVM::InstructionSequence.of(method)) + 32) # RTypedData.data
def current_ec = word(LIB['ruby_current_ec']) # dlsym: this thread's copy of the TLS variable

# The control frames of this thread, innermost first: [address, iseq, pc, ep flags, ep].
def frames
  ec = current_ec
  stack_end = word(ec + L[:ec_vm_stack]) + 8 * word(ec + L[:ec_vm_stack_size])
  cfp = word(ec + L[:ec_cfp])
  list = []
  while cfp < stack_end && list.size < 1000
    ep = word(cfp + L[:frame_ep])
    list << [cfp, word(cfp + L[:frame_iseq]), word(cfp + L[:frame_pc]), word(ep), ep]
    cfp += L[:frame_size]
  end
  [list, cfp == stack_end]
end

# ruby_current_vm_ptr -> main ractor -> its threads: this one by its thread_id, with its ec.
vm = word(LIB['ruby_current_vm_ptr'])
ractor = word(vm + L[:vm_main_ractor])
found = []
node = word(ractor + L[:ractor_threads_head])
while node != ractor + L[:ractor_threads_head] && found.size < 100
  found << node
  node = word(node)
end
mine = found.find { |t| word(t + L[:thread_native_id]) == fs_base }
check('vm_main_ractor/ractor_threads_head', found.size == Thread.list.size)
check('thread_native_id (the FS base)', mine)
check('thread_ec', mine && word(mine + L[:thread_ec]) == current_ec)
Thread.current.name = 'a name longer than the fifteen bytes of comm'
check('thread_name (Thread#name)', mine && word(mine + L[:thread_name]) == Fiddle.dlwrap(Thread.current.name))

OUTER_LINE = __LINE__ + 1
def ruby_offsets_outer_method_with_a_name_longer_than_an_embedded_string = inner
def inner = [frames, __LINE__]
(list, reached_end), inner_line = ruby_offsets_outer_method_with_a_name_longer_than_an_embedded_string
me = iseq_of(method(:inner))
outer = iseq_of(method(:ruby_offsets_outer_method_with_a_name_longer_than_an_embedded_string))
at = list.index { |f| f[1] == me }
check('ec_cfp/frame_iseq/frame_size', at && list[at + 1][1] == outer)
check('ec_vm_stack/ec_vm_stack_size (the walk ends at the stack end)', reached_end)
check('object type imemo_iseq', flags(me) & L[:object_type_mask] == L[:type_imemo] &&
                                (flags(me) >> L[:imemo_shift]) & 15 == L[:imemo_iseq])
body = word(me + L[:iseq_body])
outer_body = word(outer + L[:iseq_body])
check('body_label (embedded string)', string(word(body + L[:body_label])) == 'inner')
check('body_label (heap string)', string(word(outer_body + L[:body_label])) ==
                                  'ruby_offsets_outer_method_with_a_name_longer_than_an_embedded_string')
check('body_path', path(word(body + L[:body_path])) == __FILE__)
check('body_first_line', word(body + L[:body_first_line]) >> 1 == OUTER_LINE + 1)
encoded = word(outer_body + L[:body_iseq_encoded])
check('body_iseq_encoded/size', list[at + 1][2] > encoded &&
                                list[at + 1][2] <= encoded + 8 * u32(outer_body + L[:body_iseq_size]))
# pc is the next instruction: the line of the one before it.
caller_line = line_at(outer_body, (list[at + 1][2] - encoded) / 8 - 1)
check('frame_pc/body_insns_info', caller_line == OUTER_LINE)
check('frame_flag_finish (not on a call from Ruby)', list[at][3] & L[:frame_flag_finish] == 0)
block_frames = [1].map { frames[0] }.first
walker = block_frames.index { |f| f[1] == iseq_of(method(:frames)) }
block = walker && block_frames[walker + 1] # frames' own innermost frames are overwritten by then
check('frame_flag_finish (a block called from C)', block && block[3] & L[:frame_flag_finish] != 0)
map = block && block_frames[block_frames.index(block) + 1]
check('frame_magic_cfunc (Array#map, below its block)', map && map[3] & L[:frame_magic_mask] == L[:frame_magic_cfunc])
# Read while map runs: its frame's words on the VM stack are reused once it returns.
map_me = [1].map do
  list, = frames
  cfunc = list.find { |f| f[3] & L[:frame_magic_mask] == L[:frame_magic_cfunc] }
  cfunc && word(cfunc[4] - L[:ep_method_entry])
end.first
check('ep_method_entry/imemo_ment (Array#map\'s method entry)',
      map_me && flags(map_me) & L[:object_type_mask] == L[:type_imemo] && (flags(map_me) >> L[:imemo_shift]) & 15 == L[:imemo_ment])
map_id = map_me && word(word(map_me + L[:method_entry_def]) + L[:definition_original_id])
rb_intern = Fiddle::Function.new(LIB['rb_intern'], [Fiddle::TYPE_VOIDP], Fiddle::TYPE_UINTPTR_T)
check('method_entry_def/definition_original_id (the ID of map)', map_id && map_id == rb_intern.call('map'))

# A file loaded by require through a symbolic link keeps [path, realpath]; a long method has
# the succinct line index.
Dir.mktmpdir do |dir|
  Dir.mkdir(File.join(dir, 'real'))
  File.symlink(File.join(dir, 'real'), File.join(dir, 'link'))
  file = File.join(dir, 'link', 'ruby_offsets_required.rb')
  File.write(file, "def ruby_offsets_required\n" + "  x = 1\n" * 80 + "  frames\nend\n")
  require file
  required_list, = ruby_offsets_required
  required = iseq_of(method(:ruby_offsets_required))
  frame = required_list.find { |f| f[1] == required }
  rbody = word(required + L[:iseq_body])
  check('body_path (array pathobj)', flags(word(rbody + L[:body_path])) & L[:object_type_mask] == L[:type_array] &&
                                      path(word(rbody + L[:body_path])) == file)
  rencoded = word(rbody + L[:body_iseq_encoded])
  check('body_insns_succ_table (line past 54 instructions)',
        frame && line_at(rbody, (frame[2] - rencoded) / 8 - 1) == 82)
end

RESULTS.each { |name, ok| puts "#{ok ? 'ok  ' : 'DIFF'} #{name}" }
exit(RESULTS.values.all? ? 0 : 1)
