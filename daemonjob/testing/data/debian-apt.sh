# Sourced by the provisioning scripts: apt against the Debian mirror the machine already
# uses (read from its own sources, never hard-coded), with a private state directory, so
# the machine's apt configuration is never changed. The caller defines log and die.

debian_mirror() {  # prints the mirror's URL, or fails
    local f m
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
        [ -f "$f" ] || continue
        m=$(awk '/^URIs:/ {print $2} /^deb / {for(i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) {print $i; break}}' "$f" \
            | grep -E '/debian/?$' | head -n1 || true)
        [ -n "$m" ] && { echo "${m%/}"; return 0; }
    done
    return 1
}

apt_use() {  # work-dir, then sources.list lines; sets APT, the apt-get command on that state
    local work=$1; shift
    printf '%s\n' "$@" > "$work/apt/sources.list"
    APT=(apt-get -q -o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
         -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache::Archives=$work/apt/archives"
         -o "Dir::Cache=$work/apt" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
}

apt_update_once() {  # work-dir, what the lists are (for the log)
    if [ ! -f "$1/apt/.updated" ]; then
        log "reading package lists ($2)"
        "${APT[@]}" update >&2 || die "apt-get update failed against the configured Debian mirror"
        touch "$1/apt/.updated"
    fi
}
