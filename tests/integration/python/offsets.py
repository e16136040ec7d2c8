"""Checks bpfprof's layout table entry for this interpreter's version (python_layout.h)
against what the running interpreter shows of itself through ctypes. Prints one line per
field; exits 1 if any differs.  Usage: offsets.py PATH/TO/python_layout.h"""
import ctypes
import re
import sys
import threading

version = "%d%d" % sys.version_info[:2]
header = open(sys.argv[1]).read()


def entry_text(name):
    """An entry's text: its initializer, or (an entry made from another) the other's
    followed by the assignments that change it."""
    whole = re.search(r"kPython%s\{(.*?)\};" % name, header, re.S)
    if whole:
        return whole.group(1)
    derived = re.search(r"kPython%s = \[\] \{\s*PythonLayout layout = kPython(\d+);(.*?)\}\(\);" % name,
                        header, re.S)
    return derived and entry_text(derived.group(1)) + derived.group(2)


text = entry_text(version)
if not text:
    print("no layout entry for python %d.%d" % sys.version_info[:2])
    sys.exit(1)
L = {k: int(v) for k, v in re.findall(r"\.(\w+) = (\d+)", text)}
SHIM = "BPFPROF_PYTHON_ENTRY_SHIM_FRAME" in text
IN_THREAD = "BPFPROF_PYTHON_FRAME_IN_THREAD" in text
# Before 3.11: frame objects, f_lasti, every frame its own activation, pthread_self().
FRAME_OBJECTS = sys.version_info < (3, 11)
api = ctypes.pythonapi
api.PyThreadState_Get.restype = ctypes.c_void_p
P = ctypes.c_void_p
I = ctypes.c_int
results = {}


def check(name, ok):
    results[name] = bool(ok)


if "PythonRuntimeState::kInterpreterHeadStatic" in text:
    # 3.6: interp_head, which PyInterpreterState_Head returns: mov interp_head(%rip),%rax
    head_function = ctypes.cast(api.PyInterpreterState_Head, P).value
    code = ctypes.string_at(head_function, 7)
    assert code[:3] == b"\x48\x8b\x05", code
    runtime = head_function + 7 + int.from_bytes(code[3:7], "little", signed=True)
else:
    runtime = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
ts = api.PyThreadState_Get()
main_interpreter = getattr(api, "PyInterpreterState_Main", None) or api.PyInterpreterState_Head
main_interpreter.restype = ctypes.c_void_p
interp = main_interpreter()
check("runtime_interpreters_head", P.from_address(runtime + L["runtime_interpreters_head"]).value == interp)

def fs_base():
    """The calling thread's FS base (arch_prctl ARCH_GET_FS), which the kernel side reads."""
    base = ctypes.c_ulong()
    ctypes.CDLL(None, use_errno=True).syscall(158, 0x1003, ctypes.byref(base))
    return base.value


def thread_key(tid, ident):
    return ident if FRAME_OBJECTS else tid


# 3.7 has no native thread ids (nor needs them: FRAME_OBJECTS).
get_native_id = getattr(threading, "get_native_id", lambda: None)
check("thread_native_id", ctypes.c_ulong.from_address(ts + L["thread_native_id"]).value ==
      thread_key(get_native_id(), threading.get_ident()))
if FRAME_OBJECTS:
    check("thread_id is the FS base", threading.get_ident() == fs_base())

started = threading.Event()
done = threading.Event()
other = threading.Thread(target=lambda: (started.set(), done.wait()))
other.start()
started.wait()
head = P.from_address(interp + L["interpreter_threads_head"]).value
check("interpreter_threads_head", head not in (None, ts) and
      ctypes.c_ulong.from_address(head + L["thread_native_id"]).value == thread_key(getattr(other, "native_id", None), other.ident))
check("thread_next", P.from_address(head + L["thread_next"]).value == ts)
done.set()
other.join()


def inner(*_):
    # Only C calls between here and the reads: no Python frame is pushed in between.
    frame = P.from_address(ts + L["thread_frame"]).value
    if not IN_THREAD:  # through the thread's _PyCFrame
        frame = P.from_address(frame + L["cframe_current_frame"]).value
    code = P.from_address(frame + L["frame_code"]).value
    previous = P.from_address(frame + L["frame_previous"]).value
    caller_code = P.from_address(previous + L["frame_code"]).value
    me = sys._getframe()
    if FRAME_OBJECTS:  # f_lasti, an int; Python shows it in bytes (3.10 keeps code units)
        lasti = I.from_address(previous + L["frame_prev_instr"]).value
        units = "BPFPROF_PYTHON_INSTRUCTION_LASTI_UNITS" in text
        # No entry mark to check: each frame runs in a call of the interpreter loop of its own.
        return (code == id(me.f_code), caller_code == id(me.f_back.f_code),
                lasti * (2 if units else 1) == me.f_back.f_lasti, None)
    caller_instr = P.from_address(previous + L["frame_prev_instr"]).value
    if SHIM:  # 3.12+: the frame below is the activation's shim frame
        entry = ctypes.c_ubyte.from_address(previous + L["frame_entry"]).value == L["shim_owner"]
    else:
        entry = ctypes.c_bool.from_address(frame + L["frame_entry"]).value
    return (code == id(me.f_code), caller_code == id(me.f_back.f_code),
            caller_instr - (caller_code + L["code_instructions"]) == me.f_back.f_lasti, entry)


def outer():
    return inner()


direct = outer()
check("thread_frame/frame_code", direct[0])
check("frame_previous", direct[1])
check("frame_prev_instr", direct[2])
via_c = list(map(inner, [0]))[0]  # called back from C: a new activation
if not FRAME_OBJECTS:
    check("frame_is_entry", direct[3] is False and via_c[3] is True)

code = outer.__code__
addr = id(code)
check("object_type", P.from_address(addr + L["object_type"]).value == id(type(code)))
check("type_basic_size", ctypes.c_ssize_t.from_address(id(type(code)) + L["type_basic_size"]).value == type(code).__basicsize__)
check("code_size", type(code).__basicsize__ == L["code_size"])
check("code_first_line", I.from_address(addr + L["code_first_line"]).value == code.co_firstlineno)
names = {"filename": "co_filename", "qualname": "co_qualname", "linetable": "co_linetable"}
if FRAME_OBJECTS:  # co_name; co_lnotab until 3.10
    names.update(qualname="co_name", linetable="co_linetable" if sys.version_info >= (3, 10) else "co_lnotab")
for field, attribute in names.items():
    check("code_" + field, P.from_address(addr + L["code_" + field]).value == id(getattr(code, attribute)))

for text, data_offset, kind in (("medlar", "str_ascii_data", 1), ("m\xe9dlar", "str_compact_data", 1),
                                ("\u20acx", "str_compact_data", 2), ("\U0001F600", "str_compact_data", 4)):
    a = id(text)
    state = ctypes.c_uint.from_address(a + L["str_state"]).value
    raw = ctypes.string_at(a + L[data_offset], len(text) * kind)
    check("str %r" % text, ctypes.c_ssize_t.from_address(a + L["str_length"]).value == len(text) and
          (state >> 2 & 7) == kind and (state >> 5 & 1) == 1 and
          raw == text.encode({1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]))
blob = b"orchard"
check("bytes", ctypes.c_ssize_t.from_address(id(blob) + L["bytes_size"]).value == len(blob) and
      ctypes.string_at(id(blob) + L["bytes_data"], len(blob)) == blob)

bad = [name for name, ok in results.items() if not ok]
print("python %d.%d: %d layout fields checked, %s" % (sys.version_info[:2] + (len(results), "all match" if not bad else "wrong: " + ", ".join(bad))))
sys.exit(1 if bad else 0)
