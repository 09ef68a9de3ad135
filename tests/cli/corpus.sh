#!/usr/bin/env bash
# The golden kernel corpus: every kernel `kiln compile` generates for the recipe configs below, for every
# target, must hash as tests/golden/kernels.corpus says. Each config is compiled with `--emit source`
# (the backends' generated CUDA C and LLVM IR instead of binaries: no NVRTC or LLVM passes, ~0.3 s a
# config), and the corpus keeps, per kernel row, its IR hash and default config, and per binary its
# target, config, grid, launch geometry, format and the SHA-256 of its source. A refactor must leave the
# corpus unchanged; a change that means to change kernels regenerates it on purpose and shows which
# kernels it changed in review:
#     KILN_UPDATE_GOLDEN=1 ctest --test-dir build -R cli.corpus      (or: make golden)
# LLVM IR is hashed without its machine lines (target triple, datalayout, attribute groups), which
# name the CPU the host code is built for, so the corpus is the same on every machine.
set -u
. "$(dirname "$0")/checks.bash"
recipe="$src/recipes/llama.lua"
golden="$src/tests/golden/kernels.corpus"
targets=host,sm_80,sm_90a,sm_100a,gfx942,gfx950

# name | kiln compile options [| targets]. Every named model at its defaults, then the weight formats and dtypes.
configs=()
models=$("$kiln" models "$recipe" | sed 's/ (default)//') || { bad "kiln models"; checks_done corpus; exit; }
for m in $models; do configs+=("$m|--model $m"); done
for w in q4_0 q4_1 q8_0 w4g32; do configs+=("smollm2-135m.$w|--set weight_dtype=$w"); done
for w in w4g128z w4g64 f8g128; do configs+=("llama-3.2-1b.$w|--model llama-3.2-1b --set weight_dtype=$w"); done
for w in w4g128z f8g128; do configs+=("llama-3-8b.$w|--model llama-3-8b --set weight_dtype=$w"); done
# the K-quants' tiles exceed the AMDGPU lowering's per-program stack (docs/BACKENDS.md): no gfx targets
for w in q4_k q6_k; do
    configs+=("llama-3-8b.$w|--model llama-3-8b --set weight_dtype=$w|host,sm_80,sm_90a,sm_100a")
done
for t in f16 f32; do configs+=("llama-3.2-1b.$t|--model llama-3.2-1b --set dtype=$t"); done
configs+=("smollm2-135m.f32.q4_1|--set dtype=f32 --set weight_dtype=q4_1")

# One corpus line per kernel row and per binary of package $2, labelled $1.
corpus_of() {
    local label=$1 pkg=$2 dir=$3 id kernel target config grid block smem format sum
    sqlite3 -separator ' ' "$pkg" \
        "select '$label', 'kernel', name, family, ir_hash, replace(config, ' ', ',') from kernels order by id" ||
        return 1
    rm -rf "$dir"; mkdir -p "$dir"
    sqlite3 -separator ' ' "$pkg" \
        "select b.rowid, k.name, b.target, replace(b.config, ' ', ','), replace(b.grid, ' ', ','), b.block,
                b.smem, b.format, writefile('$dir/' || b.rowid, b.data) >= 0
         from binaries b join kernels k on k.id = b.kernel_id order by k.id, b.target, b.config" |
    while read -r id kernel target config grid block smem format _; do
        sum=$(grep -Ev '^(target (triple|datalayout)|attributes #)' "$dir/$id" | sha256sum | cut -c1-16)
        echo "$label binary $kernel $target $config $grid $block $smem $format $sum"
    done
}

out="$d/kernels.corpus"
: > "$out"
for c in "${configs[@]}"; do
    label=${c%%|*} opts=${c#*|} t=$targets
    case $opts in *'|'*) t=${opts#*|} opts=${opts%%|*} ;; esac
    # shellcheck disable=SC2086 # opts are words
    if "$kiln" compile "$recipe" $opts --target "$t" --emit source --no-cache -o "$d/$label.kiln" \
        2> "$d/$label.err" && corpus_of "$label" "$d/$label.kiln" "$d/src" >> "$out"; then
        ok "$label: $(grep -c "^$label binary" "$out") kernel sources"
    else
        bad "$label: $(head -1 "$d/$label.err")"
    fi
done

if [ "${KILN_UPDATE_GOLDEN:-}" = 1 ]; then cp "$out" "$golden"; echo "corpus: wrote $golden"; fi
if [ ! -f "$golden" ]; then
    bad "missing $golden (KILN_UPDATE_GOLDEN=1 writes it)"
elif diff -u "$golden" "$out" > "$d/corpus.diff"; then
    ok "corpus: $(wc -l < "$out") lines as $golden"
else
    bad "corpus differs from $golden ($(grep -c '^[-+][^-+]' "$d/corpus.diff") lines; kernels below)"
    grep '^[-+][^-+]' "$d/corpus.diff" | cut -d' ' -f1-5 | sort -u | head -40
fi
checks_done corpus
