#!/usr/bin/env bash
# ctf_layers_test.sh - the layer rule of operators/ctf (operators/ctf/README.md),
# checked on the sources and, when CTF_CORE_LIB names it, on the built ctf_core:
#
#   core/        includes only core/ headers and, of libkop, the headers of pure
#                values (kop/common.h, err.h, meta.h, buf.h, clock.h; and
#                kop/informer.h in core/admission.h alone, for the callback
#                table kop_informer_handler); its objects call no libkop
#                function but kop_meta_*, kop_status_*, kop_err_*, kop_buf_*,
#                kop_strerror (no client, cache, work queue, controller or
#                manager: no Kubernetes calls);
#   controller/  includes core/ and controller/ headers, never api/ or web/;
#   api/         includes core/, api/ and web/ headers, and of controller/
#                only its declared interface, controller/operator.h (with the
#                controller/resources.h it includes);
#   web/         includes no other layer;
#   every quoted include in operators/ctf names its folder ("core/names.h").
#
# Env: SRC (repo root; default: two levels up), CTF_CORE_LIB (optional path of
# libctf_core.a). Exit 1 with one line per breach.
set -uo pipefail

SRC=${SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
CTF="$SRC/operators/ctf"
breaches=0
breach() {
    printf 'FAIL: %s\n' "$*" >&2
    breaches=$((breaches + 1))
}

# includes FILE: one line per #include, as "quoted NAME" or "angle NAME".
includes() {
    sed -n -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/quoted \1/p' \
        -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/angle \1/p' "$1"
}

# libkop_ok REL NAME: whether a core file may include libkop header NAME.
libkop_ok() {
    case "$2" in
    kop/common.h | kop/err.h | kop/meta.h | kop/buf.h | kop/clock.h) return 0 ;;
    kop/informer.h) [ "$1" = core/admission.h ] ;;
    *) return 1 ;;
    esac
}

cd "$CTF" || { echo "FAIL: no $CTF" >&2; exit 1; }
nfiles=0
while IFS= read -r rel; do
    nfiles=$((nfiles + 1))
    layer=${rel%%/*}
    [ "$layer" = "$rel" ] && layer=top # main.c: wires every layer
    while read -r kind name; do
        if [ "$kind" = quoted ] && [[ "$name" == kop/* ]]; then
            kind=angle # "kop/clock.h" is libkop's, however it is spelled
        fi
        if [ "$kind" = quoted ] && [[ "$name" != */* ]]; then
            breach "$rel includes \"$name\": name its folder (core/, controller/, api/, web/)"
            continue
        fi
        case "$layer:$kind" in
        core:quoted)
            [[ "$name" == core/* ]] || breach "$rel (core) includes \"$name\": core/ includes only core/ headers" ;;
        core:angle)
            case "$name" in
            kop/*) libkop_ok "$rel" "$name" ||
                breach "$rel (core) includes <$name>: core/ makes no Kubernetes calls (README.md)" ;;
            microhttpd.h | curl/* | fyaml.h | libfyaml.h)
                breach "$rel (core) includes <$name>: core/ does no I/O" ;;
            esac ;;
        controller:quoted)
            [[ "$name" == core/* || "$name" == controller/* ]] ||
                breach "$rel (controller) includes \"$name\": the controller does not know api/ or web/" ;;
        api:quoted)
            case "$name" in
            core/* | api/* | web/* | controller/operator.h | controller/resources.h) ;;
            controller/*) breach "$rel (api) includes \"$name\": api/ uses the controller only through controller/operator.h" ;;
            *) breach "$rel (api) includes \"$name\"" ;;
            esac ;;
        web:quoted)
            [[ "$name" == web/* ]] || breach "$rel (web) includes \"$name\": web/ depends on no layer" ;;
        esac
    done < <(includes "$rel")
done < <(find core controller api web -name '*.[ch]' | sort; echo main.c)
[ "$nfiles" -gt 30 ] || breach "only $nfiles files found under $CTF: is the layout there?"

# The built core: which libkop functions its objects call.
if [ -n "${CTF_CORE_LIB:-}" ]; then
    if [ ! -f "$CTF_CORE_LIB" ]; then
        breach "CTF_CORE_LIB=$CTF_CORE_LIB does not exist"
    else
        calls=$(nm -u "$CTF_CORE_LIB" | awk '{print $NF}' | grep '^kop_' | sort -u |
            grep -v -E '^kop_(meta|status|err|buf)_|^kop_strerror$|^kop__assert' || true)
        for c in $calls; do
            breach "ctf_core calls $c: core/ makes no Kubernetes calls"
        done
    fi
fi

if [ "$breaches" -gt 0 ]; then
    echo "$breaches breaches of the layer rule (operators/ctf/README.md)" >&2
    exit 1
fi
echo "ok: $nfiles files of operators/ctf keep the layer rule${CTF_CORE_LIB:+; ctf_core calls no Kubernetes function}"
