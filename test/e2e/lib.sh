# lib.sh - what every e2e scenario shares; sourced, not run. Each scenario
# defines fail() (which knows what logs to show), k() and cleanup() itself.

passed=0

# log WORDS: a section heading.
log() { printf '=== %s\n' "$*"; }

# ok WORDS: one more check passed.
ok() { passed=$((passed + 1)); printf 'ok %d - %s\n' "$passed" "$*"; }

# wait_for SECONDS DESCRIPTION COMMAND...: retry COMMAND until it succeeds,
# fail after SECONDS (a generous bound, never a timing assertion).
wait_for() {
    local secs=$1 what=$2
    shift 2
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || fail "timed out after ${secs}s waiting for: $what"
        sleep 0.5
    done
}

# free_port: a loopback TCP port nobody listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
