#!/usr/bin/env bash
# What synchronous replication costs the service, and what a switch of its
# database costs it, measured on a pg_auto_failover cluster of our own.
#
#   bench/failover.sh            (as root, from anywhere; builds nothing)
#
# Environment:
#   BENCH            the bench binary (default ./target/release/bench); it needs
#                    the `failover` scenario (--failover-url, --switch-command)
#   OUT              where results go (default target/failover-bench)
#   SECONDS_PER_RUN  length of each holds run (default 10)
# Relative paths are taken from the repository root, where the script runs.
#
# Steps, each printed with its commands and timings:
#   1. holds/s on a single server against a two-node synchronous cluster,
#      alternating single, sync-pair, single, sync-pair;
#   2. the `failover` scenario through a planned failover (planned-sync), a
#      crashed primary (crash-sync), and, with the standby taken out of the
#      synchronous quorum, a crashed primary again (crash-async).
#
# Unlike tests/behaviour/failover_cluster.rs, whose way of running the
# cluster this follows, the servers keep fsync on and the monitor keeps
# pg_auto_failover's default timeouts: a crashed primary's standby takes
# writes about 50 s after the crash (20 s until the primary is unhealthy, 30 s
# of demote timeout). Everything started here runs in one temporary folder
# and is killed and removed on exit, also on failure or Ctrl-C.
set -euo pipefail

cd "$(dirname "$0")/.."

BENCH=${BENCH:-./target/release/bench}
OUT=${OUT:-target/failover-bench}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}

PG_BIN=/usr/lib/postgresql/15/bin
FORMATION=default
# The bench creates tables in this database for the failover scenario;
# pg_autoctl creates it on the first node, and it replicates.
DATABASE=booking
# For every server, the single one and the cluster's alike. pg_auto_failover
# would otherwise give each of its servers a quarter of the machine's memory.
SERVER_SETTINGS="shared_buffers = '256MB'
max_connections = 200"
# Marks a postgresql.conf that has the settings already: the standby's is a
# copy of the primary's, made by pg_basebackup.
MARKER="# Settings of bench/failover.sh"
# The bench switches the database at this second of each failover run.
SWITCH_AFTER=8
PLANNED_SECONDS=40
# A crash costs about 50 s without writes (see above); 90 s leaves some 30 s
# of writes on the new primary to count what was lost.
CRASH_SECONDS=90

DIR=            # the temporary folder
BENCH_PID=      # a running bench, the leader of its own process group
declare -A KEEPER=()   # `pg_autoctl run` per server name, each a process group
declare -A PORT=()     # port per server name: monitor, node0, node1, single
PRIMARY=        # node0 or node1, as the monitor last said
STANDBY=
CRASHED=        # the node crash_primary killed
RESULTS=()      # the markdown files this run wrote
T0=$(date +%s.%N)

# Progress and commands go to fd 3, the script's own stdout, also from
# functions whose output is sent to a log file.
exec 3>&1
log() { printf '[%6.1f s] %s\n' "$(since "$T0")" "$*" >&3; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# Prints a command, shell-quoted, then runs it.
shown() {
    { printf '+'; printf ' %q' "$@"; printf '\n'; } >&3
    "$@" 3>&-
}

# Its arguments as one shell command line, for the bench's `sh -c`.
quoted() {
    local line
    line=$(printf '%q ' "$@")
    echo "${line% }"
}

# One statement through psql: unaligned, `|` between fields, no psqlrc.
query() {
    "$PG_BIN/psql" -AtX -F '|' -v ON_ERROR_STOP=1 -d "$1" -c "$2"
}

monitor_url() {
    echo "postgres://autoctl_node@127.0.0.1:${PORT[monitor]}/pg_auto_failover?sslmode=disable&connect_timeout=5"
}

server_url() {
    echo "postgres://postgres@127.0.0.1:${PORT[$1]}/${2:-postgres}"
}

cleanup() {
    local status=$?
    # A second Ctrl-C must not cut the cleaning short.
    trap - EXIT
    trap '' INT TERM
    if [[ -n $BENCH_PID ]]; then
        kill -KILL -- "-$BENCH_PID" 2>/dev/null || true
        wait "$BENCH_PID" 2>/dev/null || true
    fi
    if [[ -n $DIR && -d $DIR ]]; then
        log "cleaning up $DIR"
        # Keepers first: each starts its Postgres again when it stops.
        "$DIR/kill-tree.sh" "$DIR" "${KEEPER[@]}" || true
        local name
        for name in monitor node0 node1 single; do
            remove_postmaster_leftovers "$DIR/$name"
        done
        rm -rf "$DIR"
    fi
    exit "$status"
}

# What a SIGKILLed postmaster leaves outside its data directory, as its
# postmaster.pid names it: its System V shared memory segment (line 7) and
# its socket and lock file (line 5 the directory, line 4 the port;
# /var/run/postgresql for pg_autoctl's servers). The lock goes only if it
# names this data directory.
remove_postmaster_leftovers() {
    local pgdata=$1 lines shmid lock
    [[ -f $pgdata/postmaster.pid ]] || return 0
    mapfile -t lines < "$pgdata/postmaster.pid"
    [[ ${lines[1]:-} == "$pgdata" ]] || return 0
    read -r _ shmid _ <<< "${lines[6]:-}"
    if [[ -n ${shmid:-} ]]; then
        ipcrm -m "$shmid" 2>/dev/null || true
    fi
    [[ -n ${lines[3]:-} && -n ${lines[4]:-} ]] || return 0
    lock="${lines[4]}/.s.PGSQL.${lines[3]}.lock"
    if [[ -f $lock && $(sed -n 2p "$lock") == "$pgdata" ]]; then
        rm -f "$lock" "${lines[4]}/.s.PGSQL.${lines[3]}"
    fi
}

# The temporary folder, owned by postgres (pg_autoctl and initdb refuse
# root), and the two helpers that both this script and the bench's switch
# commands run: those must be self-contained commands.
make_workdir() {
    DIR=$(realpath "$(mktemp -d -t booking-failover-bench-XXXXXX)")
    # pg_autoctl keeps its pid files in $XDG_RUNTIME_DIR only if it exists;
    # otherwise in /tmp/pg_autoctl, outside our folder.
    mkdir "$DIR/run"
    chown postgres "$DIR" "$DIR/run"

    # pg_autoctl as postgres, with its configuration, state and pid files in
    # our folder instead of postgres's home, and its working directory there
    # too, which is how kill-tree.sh finds the keepers.
    cat > "$DIR/autoctl.sh" <<EOF
#!/bin/sh
exec runuser -u postgres -- env -C '$DIR' \\
    -u PGDATA -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE \\
    XDG_CONFIG_HOME='$DIR/config' XDG_DATA_HOME='$DIR/share' \\
    XDG_RUNTIME_DIR='$DIR/run' pg_autoctl "\$@"
EOF

    # A crash: SIGKILL of process groups (a keeper's holds its postmaster),
    # then of every process whose working directory is DIR or under it.
    # Postgres's children each run in a session of their own and outlive a
    # killed group (the monitor's health check worker for good); they all
    # work in their data directory.
    cat > "$DIR/kill-tree.sh" <<'EOF'
#!/usr/bin/env bash
# kill-tree.sh DIR [PGID...]
set -u
dir=$1; shift
for group in "$@"; do kill -KILL -- "-$group" 2>/dev/null; done
for _ in $(seq 200); do
    pids=()
    for proc in /proc/[0-9]*; do
        cwd=$(readlink "$proc/cwd" 2>/dev/null) || continue
        pid=${proc#/proc/}
        [[ $pid != "$$" && ( $cwd == "$dir" || $cwd == "$dir"/* ) ]] && pids+=("$pid")
    done
    (( ${#pids[@]} )) || exit 0
    kill -KILL "${pids[@]}" 2>/dev/null
    sleep 0.05
done
echo "kill-tree.sh: processes under $dir outlived SIGKILL" >&2
exit 1
EOF
    chmod 755 "$DIR/autoctl.sh" "$DIR/kill-tree.sh"
    log "working in $DIR"
}

# Four distinct free ports of 127.0.0.1, all bound at once, then freed.
pick_ports() {
    local ports
    read -r -a ports < <(python3 -c '
import socket
s = [socket.socket() for _ in range(4)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
    PORT=([monitor]=${ports[0]} [node0]=${ports[1]} [node1]=${ports[2]} [single]=${ports[3]})
    log "ports: monitor ${PORT[monitor]}, node0 ${PORT[node0]}, node1 ${PORT[node1]}, single ${PORT[single]}"
}

# Appended after pg_auto_failover's `include` on the first line, so ours win.
append_settings() {
    local conf=$1/postgresql.conf
    grep -qxF "$MARKER" "$conf" || printf '\n%s\n%s\n' "$MARKER" "$SERVER_SETTINGS" >> "$conf"
}

# `pg_autoctl run` for a server, in a session (so a process group) of its
# own, its output in NAME.log. A background job of a script is not a group
# leader, so setsid does not fork: $! is the group's id. Disowned, so that
# bash does not report a keeper's death by SIGKILL; cleanup kills them.
spawn_keeper() {
    local name=$1
    setsid "$DIR/autoctl.sh" run --pgdata "$DIR/$name" < /dev/null >> "$DIR/$name.log" 2>&1 3>&- &
    KEEPER[$name]=$!
    disown "$!"
}

# `create` initialises, registers and stops again; between it and `run` the
# settings can be changed before anything runs with them.
create_monitor() {
    shown timeout 120 "$DIR/autoctl.sh" create monitor --pgctl "$PG_BIN/pg_ctl" \
        --pgdata "$DIR/monitor" --pgport "${PORT[monitor]}" --hostname 127.0.0.1 \
        --auth trust --no-ssl --ssl-mode disable > "$DIR/create-monitor.log" 2>&1
    # The monitor listens on '*' unless told.
    shown "$DIR/autoctl.sh" config set --pgdata "$DIR/monitor" postgresql.listen_addresses 127.0.0.1 > /dev/null
    append_settings "$DIR/monitor"
    spawn_keeper monitor
    local i
    for i in $(seq 150); do
        query "$(monitor_url)" 'SELECT 1' > /dev/null 2>&1 && return 0
        sleep 0.2
    done
    tail -n 20 "$DIR/monitor.log"
    return 1
}

# Node 1's `create` copies node 0 with pg_basebackup and so blocks until node
# 0's keeper runs.
create_node() {
    local name=$1
    shown timeout 120 "$DIR/autoctl.sh" create postgres --pgctl "$PG_BIN/pg_ctl" \
        --pgdata "$DIR/$name" --pgport "${PORT[$name]}" --hostname 127.0.0.1 --listen 127.0.0.1 \
        --name "$name" --formation "$FORMATION" --monitor "$(monitor_url)" \
        --auth trust --no-ssl --ssl-mode disable --dbname "$DATABASE" > "$DIR/create-$name.log" 2>&1
    append_settings "$DIR/$name"
    spawn_keeper "$name"
}

# Polls the monitor until one node is `primary` and the other `secondary`,
# both as assigned, printing each change of state; sets PRIMARY and STANDBY.
wait_for_primary_and_secondary() {
    local started last='' states port reported goal i
    started=$(date +%s.%N)
    for i in $(seq 900); do
        states=$(query "$(monitor_url)" "SELECT nodeport, reportedstate, goalstate FROM pgautofailover.node WHERE formationid = '$FORMATION' ORDER BY nodeid" 2>&1 || true)
        if [[ $states != "$last" ]]; then
            log "  monitor: $(tr '\n' ' ' <<< "$states")"
            last=$states
        fi
        PRIMARY='' STANDBY=''
        while IFS='|' read -r port reported goal; do
            [[ $reported == "$goal" ]] || continue
            if [[ $reported == primary ]]; then PRIMARY=$(node_on "$port"); fi
            if [[ $reported == secondary ]]; then STANDBY=$(node_on "$port"); fi
        done <<< "$states"
        if [[ -n $PRIMARY && -n $STANDBY ]]; then
            log "primary $PRIMARY (port ${PORT[$PRIMARY]}), secondary $STANDBY, after $(since "$started") s"
            return 0
        fi
        sleep 0.2
    done
    log "no primary and secondary after $(since "$started") s"
    tail -n 15 "$DIR/monitor.log" "$DIR/node0.log" "$DIR/node1.log"
    return 1
}

node_on() {
    local name
    for name in node0 node1; do
        if [[ ${PORT[$name]} == "$1" ]]; then echo "$name"; fi
    done
    return 0
}

start_cluster() {
    local started
    started=$(date +%s.%N)
    create_monitor
    create_node node0
    create_node node1
    wait_for_primary_and_secondary
    log "cluster up in $(since "$started") s"
}

# initdb and pg_ctl on the cluster's terms but alone: no replication. Its
# socket goes in our folder.
start_single() {
    local started
    started=$(date +%s.%N)
    shown runuser -u postgres -- env -C "$DIR" "$PG_BIN/initdb" -A trust -U postgres \
        -D "$DIR/single" > "$DIR/initdb.log"
    append_settings "$DIR/single"
    shown runuser -u postgres -- env -C "$DIR" "$PG_BIN/pg_ctl" -w -t 60 -D "$DIR/single" \
        -l "$DIR/single.log" -o "-p ${PORT[single]} -k $DIR -c listen_addresses=127.0.0.1" start > /dev/null
    log "single server up in $(since "$started") s"
}

# The cluster primary must wait for its standby at each commit, or the
# comparison is not the one meant.
check_synchronous() {
    local names commit
    names=$(query "$(server_url "$PRIMARY")" 'SHOW synchronous_standby_names')
    commit=$(query "$(server_url "$PRIMARY")" 'SHOW synchronous_commit')
    log "on the primary $PRIMARY: synchronous_standby_names = '$names', synchronous_commit = $commit"
    [[ $names =~ ^ANY\ 1\ \(.+\)$ && $commit == on ]] || {
        log "expected synchronous_standby_names 'ANY 1 (...)' and synchronous_commit on"
        return 1
    }
}

# The settings measured differently besides replication: pg_auto_failover
# tunes its servers (work_mem, wal_log_hints, pg_stat_statements, ...).
show_setting_differences() {
    local sql="SELECT name || ' = ' || setting FROM pg_settings
               WHERE source NOT IN ('default', 'override')
                 AND name NOT IN ('port', 'cluster_name', 'unix_socket_directories', 'config_file',
                                  'data_directory', 'hba_file', 'ident_file')
               ORDER BY name"
    log "settings that differ, single (<) against the cluster primary (>):"
    diff <(query "$(server_url single)" "$sql") <(query "$(server_url "$PRIMARY")" "$sql") || true
}

# The bench in a process group of its own, so that cleanup can kill it and
# its switch command; waited for in the background so that a signal to this
# script is handled at once.
run_bench() {
    { printf '+'; printf ' %q' "$BENCH" "$@"; printf '\n'; } >&3
    setsid "$BENCH" "$@" 3>&- &
    BENCH_PID=$!
    wait "$BENCH_PID"
    BENCH_PID=
}

measure_holds() {
    local n label name started
    for n in 1 2; do
        for label in single sync-pair; do
            if [[ $label == single ]]; then name=single; else name=$PRIMARY; fi
            started=$(date +%s.%N)
            run_bench --store postgres --only holds --seconds "$SECONDS_PER_RUN" \
                --postgres-url "$(server_url "$name")" \
                --markdown "$OUT/holds-$label-$n.md" --json "$OUT/holds-$label-$n.json"
            RESULTS+=("$OUT/holds-$label-$n.md")
            log "holds $label $n took $(since "$started") s"
        done
    done
}

# One run of the failover scenario: steady holds through the multi-host URL,
# SWITCH_AFTER seconds in `sh -c COMMAND`. After it the bench runs its raw
# SQL baseline for as long on --postgres-url, whose default is the shared
# server on 5432: it gets our single server instead.
measure_failover() {
    local label=$1 seconds=$2 command=$3 started
    started=$(date +%s.%N)
    run_bench --store postgres --only failover --postgres-url "$(server_url single)" \
        --failover-url "postgres://postgres@127.0.0.1:${PORT[node0]},127.0.0.1:${PORT[node1]}/$DATABASE?target_session_attrs=read-write" \
        --switch-command "$command" --switch-after "$SWITCH_AFTER" --seconds "$seconds" \
        --failover-label "$label" --markdown "$OUT/failover-$label.md" --json "$OUT/failover-$label.json"
    RESULTS+=("$OUT/failover-$label.md")
    log "failover $label took $(since "$started") s"
}

# Returns after 5-8 s; the new primary takes writes after about 1.5 s.
# pg_autoctl 2.0 logs a harmless "invalid input syntax for type integer"
# ERROR here and succeeds.
planned_failover() {
    measure_failover planned-sync "$PLANNED_SECONDS" \
        "$(quoted "$DIR/autoctl.sh" perform failover --pgdata "$DIR/monitor" \
            --formation "$FORMATION" --group 0 --wait 120)"
    wait_for_primary_and_secondary
}

# The primary's keeper, postmaster and backends SIGKILLed at once, as with a
# machine that is gone.
crash_primary() {
    local label=$1 victim=$PRIMARY
    measure_failover "$label" "$CRASH_SECONDS" \
        "$(quoted "$DIR/kill-tree.sh" "$DIR/$victim" "${KEEPER[$victim]}")"
    unset 'KEEPER[$victim]'
    CRASHED=$victim
}

# The killed node rejoins as the standby (crash recovery, pg_rewind,
# catching up): 2-7 s after its keeper starts again. Its postmaster.pid and
# socket lock go first: they name the killed postmaster's pid, which the
# processes of the crash run may have reused by now, and Postgres refuses to
# start while that pid is alive (pg_autoctl retries only after 20 s; one
# rejoin without this took 53 s). kill-tree.sh left no process of that data
# directory.
restart_crashed() {
    remove_postmaster_leftovers "$DIR/$CRASHED"
    rm -f "$DIR/$CRASHED/postmaster.pid"
    log "again, in its own process group: $DIR/autoctl.sh run --pgdata $DIR/$CRASHED"
    spawn_keeper "$CRASHED"
    wait_for_primary_and_secondary
}

# The standby no longer counts for synchronous replication: the primary
# empties synchronous_standby_names (via the `apply_settings` state) within
# half a second. pg_autoctl 2.0 logs a harmless get_nodes ERROR here and
# succeeds.
make_asynchronous() {
    local i names
    shown "$DIR/autoctl.sh" set node replication-quorum false --pgdata "$DIR/$STANDBY" \
        > "$DIR/replication-quorum.log" 2>&1
    for i in $(seq 150); do
        names=$(query "$(server_url "$PRIMARY")" 'SHOW synchronous_standby_names')
        [[ -z $names ]] && break
        sleep 0.2
    done
    log "on the primary $PRIMARY after $i polls: synchronous_standby_names = '$names'"
    [[ -z $names ]] || return 1
    wait_for_primary_and_secondary
}

report_losses() {
    local label
    log "what the bench reported as lost:"
    for label in planned-sync crash-sync crash-async; do
        echo "-- $label:"
        grep -i 'lost' "$OUT/failover-$label.md" || echo "(no line mentions lost)"
    done
}

summary() {
    local file
    log "summary"
    for file in "${RESULTS[@]}"; do
        echo "=== $file"
        cat "$file"
    done
}

main() {
    # Fail before a cluster is built rather than after the holds runs.
    if ! grep -q -- '--failover-url' <<< "$("$BENCH" --help 2>/dev/null || true)"; then
        echo "$BENCH is missing or has no failover scenario; build it or set BENCH" >&2
        exit 1
    fi
    mkdir -p "$OUT"
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    make_workdir
    pick_ports
    start_cluster
    start_single
    check_synchronous
    show_setting_differences
    measure_holds
    wait_for_primary_and_secondary
    planned_failover
    crash_primary crash-sync
    restart_crashed
    make_asynchronous
    crash_primary crash-async
    report_losses
    summary
}

main "$@"
