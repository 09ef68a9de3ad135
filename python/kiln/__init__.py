"""kiln: ctypes bindings over libkiln (runtime/kiln.h).

Engine(package, weights) opens a compiled package; generate() returns a request's text, stream() yields it
as it comes (whole UTF-8 characters only), tokenize()/detokenize() use the weights' tokenizer. The engine
runs in the calling thread (kiln_engine_step), one request at a time through these helpers; it is not
thread-safe. Errors raise KilnError with the library's one-line message.

The option and sampling structs are versioned by their leading size field (kiln.h): the library fills
its own defaults (kiln_*_init) in a buffer of its size, and only the fields declared here are set.
"""
import ctypes
import ctypes.util
import os

__all__ = ["Engine", "KilnError"]


class KilnError(RuntimeError):
    """A kiln call failed: the message is the library's."""


class _Options(ctypes.Structure):  # the leading fields of KilnEngineOptions
    _fields_ = [("size", ctypes.c_int), ("device", ctypes.c_int), ("kv_cache_bytes", ctypes.c_int64),
                ("max_seqs", ctypes.c_int), ("max_step_tokens", ctypes.c_int), ("no_cuda_graphs", ctypes.c_int),
                ("no_prefix_sharing", ctypes.c_int), ("profile", ctypes.c_int), ("host_threads", ctypes.c_int)]


class _Sampling(ctypes.Structure):  # the leading fields of KilnSampling
    _fields_ = [("size", ctypes.c_int), ("temperature", ctypes.c_float), ("top_k", ctypes.c_int),
                ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64), ("max_tokens", ctypes.c_int),
                ("stop_tokens", ctypes.POINTER(ctypes.c_int32)), ("n_stop", ctypes.c_int),
                ("ignore_eos", ctypes.c_int)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_int)
_TOKENIZE_SPECIAL, _TOKENIZE_NO_BOS = 1, 2
_FINISH = {0: None, 1: "stop", 2: "length", 3: "abort", 4: "error"}
_BIG = 4096  # bytes: room for either struct of any kiln.h version to come


def _find_library():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("KILN_LIB"), os.path.join(here, "libkiln.so"),
                 os.path.join(here, "..", "..", "build", "libkiln.so"), os.path.join(os.getcwd(), "build", "libkiln.so")):
        if path and os.path.exists(path):
            return path
    found = ctypes.util.find_library("kiln")
    if not found:
        raise KilnError("libkiln.so not found: set KILN_LIB to it (make build writes build/libkiln.so)")
    return found


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(_find_library())
    p, vp, i, ip = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int32)
    for name, res, args in [
            ("kiln_engine_options_init", None, [vp]), ("kiln_sampling_init", None, [vp]),
            ("kiln_engine_open", i, [p, p, vp, ctypes.POINTER(vp), p, i]), ("kiln_engine_close", None, [vp]),
            ("kiln_engine_errmsg", p, [vp]), ("kiln_engine_vocab", i, [vp]),
            ("kiln_engine_submit", i, [vp, ip, i, vp, _CALLBACK, vp, ctypes.POINTER(ctypes.c_int64)]),
            ("kiln_engine_step", i, [vp, ctypes.POINTER(i)]),
            ("kiln_engine_tokenize_v2", i, [vp, p, ctypes.c_size_t, i, ip, i, ctypes.POINTER(i)]),
            ("kiln_engine_detokenize", i, [vp, ip, i, p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)])]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


class Engine:
    """An engine for one package: Engine(package, weights, device="auto"|"host"|N, kv_cache_mb=0,
    threads=0)."""

    def __init__(self, package, weights, device="auto", kv_cache_mb=0, threads=0):
        lib = _load()
        self._lib, self._e = lib, ctypes.c_void_p()
        buf = ctypes.create_string_buffer(_BIG)
        lib.kiln_engine_options_init(buf)
        o = _Options.from_buffer(buf)
        o.device = {"auto": -1, "host": -2}.get(device, device) if isinstance(device, str) else int(device)
        o.kv_cache_bytes, o.host_threads = int(kv_cache_mb) << 20, int(threads)
        err = ctypes.create_string_buffer(512)
        st = lib.kiln_engine_open(os.fsencode(package), os.fsencode(weights), buf, ctypes.byref(self._e), err, 512)
        if st != 0:
            raise KilnError(err.value.decode("utf-8", "replace"))
        self.vocab = lib.kiln_engine_vocab(self._e)

    def close(self):
        if self._e:
            self._lib.kiln_engine_close(self._e)
            self._e = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _error(self):
        return KilnError(self._lib.kiln_engine_errmsg(self._e).decode("utf-8", "replace"))

    def tokenize(self, text, special=False, bos=True):
        """The ids of text (str or bytes); special=True parses control-token texts (only for text you wrote)."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        flags = (_TOKENIZE_SPECIAL if special else 0) | (0 if bos else _TOKENIZE_NO_BOS)
        n = ctypes.c_int()
        if self._lib.kiln_engine_tokenize_v2(self._e, data, len(data), flags, None, 0, ctypes.byref(n)):
            raise self._error()
        ids = (ctypes.c_int32 * max(n.value, 1))()
        if self._lib.kiln_engine_tokenize_v2(self._e, data, len(data), flags, ids, n.value, ctypes.byref(n)):
            raise self._error()
        return list(ids[:n.value])

    def detokenize_bytes(self, ids):
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        n = ctypes.c_size_t()
        if self._lib.kiln_engine_detokenize(self._e, arr, len(ids), None, 0, ctypes.byref(n)):
            raise self._error()
        out = ctypes.create_string_buffer(n.value + 1)
        if self._lib.kiln_engine_detokenize(self._e, arr, len(ids), out, n.value + 1, ctypes.byref(n)):
            raise self._error()
        return out.raw[:n.value]

    def detokenize(self, ids):
        return self.detokenize_bytes(ids).decode("utf-8", "replace")

    def chat_ids(self, prompt):
        """A user message in the ChatML template (as `kiln run --chat`): the template's control tokens
        real, the message's text plain."""
        return (self.tokenize("<|im_start|>user\n", special=True) + self.tokenize(prompt, bos=False) +
                self.tokenize("<|im_end|>\n<|im_start|>assistant\n", special=True, bos=False))

    def stream(self, prompt, max_tokens=128, temperature=0.0, top_p=1.0, top_k=0, seed=0, stop_tokens=(),
               ignore_eos=False, chat=False):
        """Yields the text of a request (prompt: str or token ids) as it is generated, whole UTF-8
        characters at a time; self.finish_reason is 'stop' or 'length' at the end."""
        ids = list(prompt) if not isinstance(prompt, str) else self.chat_ids(prompt) if chat else self.tokenize(prompt)
        buf = ctypes.create_string_buffer(_BIG)
        self._lib.kiln_sampling_init(buf)
        s = _Sampling.from_buffer(buf)
        s.temperature, s.top_p, s.top_k, s.seed = float(temperature), float(top_p), int(top_k), int(seed)
        s.max_tokens, s.ignore_eos = int(max_tokens), int(bool(ignore_eos))
        stops = (ctypes.c_int32 * max(len(stop_tokens), 1))(*stop_tokens)
        s.stop_tokens, s.n_stop = ctypes.cast(stops, ctypes.POINTER(ctypes.c_int32)), len(stop_tokens)
        out, state = [], {"finish": None}

        def on_token(user, req, tok, fin):
            if tok >= 0:
                out.append(tok)
            if fin:
                state["finish"] = _FINISH.get(fin, "error")
            return 0

        cb = _CALLBACK(on_token)
        arr = (ctypes.c_int32 * len(ids))(*ids)
        rid = ctypes.c_int64()
        if self._lib.kiln_engine_submit(self._e, arr, len(ids), buf, cb, None, ctypes.byref(rid)):
            raise self._error()
        shown, pending = b"", ctypes.c_int(1)
        self.finish_reason = None
        while pending.value:
            if self._lib.kiln_engine_step(self._e, ctypes.byref(pending)):
                raise self._error()
            text = self.detokenize_bytes(out) if out else b""
            end = len(text) if state["finish"] else _whole_utf8(text)
            if end > len(shown):
                piece, shown = text[len(shown):end], text[:end]
                yield piece.decode("utf-8", "replace")
        if state["finish"] in ("abort", "error"):
            raise self._error()
        self.finish_reason = state["finish"]

    def generate(self, prompt, **kw):
        """The whole text of a request (the arguments of stream)."""
        return "".join(self.stream(prompt, **kw))


def _whole_utf8(b):
    """The length of b's longest prefix that ends on a whole UTF-8 character."""
    for k in range(1, min(3, len(b)) + 1):
        c = b[-k]
        if c & 0xC0 == 0x80:
            continue
        need = 4 if c >= 0xF0 else 3 if c >= 0xE0 else 2 if c >= 0xC0 else 1
        return len(b) - k if need > k else len(b)
    return len(b)
