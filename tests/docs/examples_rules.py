"""examples_rules.py - the tables of examples.py: what the test does instead of running
a command line as written (RULES), what a python example must print (EXPECT), and the
values of the man pages' placeholders (PLACEHOLDERS). Each entry says why.

In a substitution, $CHIPD_EX_TMP is the run's scratch directory, $CHIPD_EX_BUILD the
build under test and $CHIPD_EX_BIN its bin/. The scratch directory holds textfile/,
dir/ and usr/local/{bin,share/man}/ (what a Debian 12 node with node_exporter has)
before any block runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Rule:
    """One line of the substitution table: what the test does instead of running a
    command line as written, and why."""

    files: str  # regex the document's path (from the root) matches whole
    match: str  # regex searched in the command line as the document writes it
    why: str
    sub: tuple[str, str] | None = None  # (regex, replacement) applied to the line
    elsewhere: tuple[tuple[str, str], ...] = ()  # (file, text it holds): runs it instead
    check_file: str | None = None  # after the block: this file must exist (polled)
    used: int = 0

    def covers(self, path: str) -> bool:
        """Whether the entry is for the document at @path (README.md is the top one
        only, not every folder's)."""
        return re.fullmatch(self.files, path) is not None


RULES = [
    # docs/callables.md
    Rule(r"docs/callables\.md", r"/usr/lib/x86_64-linux-gnu/chipd/callables/",
         "the installed built-ins' directory; the build under test has its own",
         sub=(r"/usr/lib/x86_64-linux-gnu/chipd/callables/", "$CHIPD_EX_BUILD/callables/")),
    Rule(r"docs/callables\.md", r"^PKG_CONFIG_PATH=build/kernels ",
         "a build tree in build/; the build under test may lie elsewhere",
         sub=(r"^PKG_CONFIG_PATH=build/", "PKG_CONFIG_PATH=$CHIPD_EX_BUILD/")),
    # README.md
    Rule(r"README\.md", r"^deploy/quickstart\.sh$",
         "installs packages (root) and builds a Release tree: minutes; the test command "
         "runs it",
         elsewhere=(("deploy/check.sh", "CHIPD_QUICK_NO_BENCH=1 deploy/quickstart.sh"),)),
    Rule(r"README\.md", r"^deploy/check\.sh$",
         "the test command itself, which runs this test; CI runs it",
         elsewhere=((".ci/run", "deploy/check.sh"),)),
    Rule(r"README\.md", r"^cmake -S \. -B build ",
         "configures, builds and runs the whole suite, this test included; the test "
         "command does the same",
         elsewhere=(("deploy/check.sh", "ctest --output-on-failure"),)),
    Rule(r"README\.md|docs/operations\.md", r"build-release/bin/",
         "the build under test stands in for the Release build",
         sub=(r"build-release/bin/", "$CHIPD_EX_BIN/")),
    Rule(r"README\.md|docs/performance\.md", r"^tests/bench/report\.sh\b",
         "every benchmark, minutes; the test command runs the pipeline with --quick",
         elsewhere=(("deploy/check.sh", "tests/bench/report.sh --quick"),
                    ("tests/bench/report.sh", "--keep)"), ("tests/bench/report.sh", "--gpu)"))),
    Rule(r"docs/performance\.md", r"^tests/bench/compare\.sh ",
         "two builds of two commits and minutes of measuring; chipbench_compare_smoke "
         "runs the script for one --quick round with the build under test on both sides",
         elsewhere=(("tests/bench/CMakeLists.txt", "compare_check.sh"),
                    ("tests/bench/compare_check.sh", "compare.sh\" --quick --rounds 1"))),
    Rule(r"README\.md|docs/performance\.md", r"^build-release/tests/bench/chipbench ",
         "a benchmark: seconds to minutes of measuring; report.sh runs every mode with "
         "--json and the test command runs report.sh --quick",
         elsewhere=(("tests/bench/report.sh", "chipbench"),
                    ("deploy/check.sh", "tests/bench/report.sh --quick"))),
    # docs/examples/markov/README.md
    Rule(r"docs/examples/markov/README\.md", r"^cmake --install build-release ",
         "the build under test stands in for the Release build",
         sub=(r"build-release", "$CHIPD_EX_BUILD")),
    # docs/operations.md
    Rule(r"docs/operations\.md", r"^\. deploy/lib/packages\.sh && chipd_need_packages ",
         "apt-get as root; the test command installs the same packages",
         elsewhere=(("deploy/check.sh", 'chipd_need_packages "${CHIPD_BUILD_PACKAGES[@]}"'),)),
    Rule(r"docs/operations\.md", r"^deploy/package\.sh ",
         "a Release build of the tree and CPack (minutes); deploy_packages runs it into "
         "a scratch directory",
         elsewhere=(("tests/deploy/packages.sh", '"$root/deploy/package.sh" "$tmp/debs"'),)),
    Rule(r"docs/operations\.md", r"^dpkg -[irP] ",
         "installs and removes packages as root, changing the machine; deploy_packages "
         "runs dpkg -i (then apt-get -f install if needed), dpkg -r and dpkg -P",
         elsewhere=(("tests/deploy/packages.sh", 'dpkg -i "${debs[@]}"'),
                    ("tests/deploy/packages.sh", "apt-get -f install -y"),
                    ("tests/deploy/packages.sh", 'dpkg -r "${packages[@]}"'),
                    ("tests/deploy/packages.sh", 'dpkg -P "${packages[@]}"'))),
    Rule(r"docs/operations\.md", r"^cmake (-S \. -B|--build) build-release\b",
         "a second build of the tree (minutes); the test command builds build-release",
         elsewhere=(("deploy/check.sh", "-B build-release -DCMAKE_BUILD_TYPE=Release"),)),
    Rule(r"docs/operations\.md", r"/usr/local/",
         "installing into /usr/local needs root and changes the machine: a scratch "
         "prefix laid out as Debian's (bin/ and share/man/ exist, man1/ and man8/ not)",
         sub=(r"/usr/local/", "$CHIPD_EX_TMP/usr/local/")),
    Rule(r"docs/operations\.md", r"^(ip|unshare|nsenter) ",
         "root, and makes a bridge and namespaces on the machine; "
         "deploy_slurm_multinode makes the two nodes the same way in a temporary "
         "directory and tears them down",
         elsewhere=(("tests/deploy/slurm_multinode.sh", 'ip link add name "$bridge" type bridge'),
                    ("tests/deploy/slurm_multinode.sh",
                     "unshare --net --uts --mount --propagation private sleep infinity"),
                    ("tests/deploy/slurm_multinode.sh", "nsenter -t"),
                    ("tests/deploy/slurm_lib.sh", 'slurmd -N "$node"'))),
    Rule(r"docs/operations\.md", r"^sbatch --nodes=2 ",
         "needs a multi-node Slurm cluster; deploy_slurm_multinode runs the job on a "
         "private two-node one",
         elsewhere=(("tests/deploy/slurm_multinode.sh",
                     "submit two chipd-multinode.sbatch --nodes=2"),)),
    Rule(r"docs/operations\.md", r"^(CHIPD_\w+=\S+ )*sbatch ",
         "needs a Slurm cluster; deploy_slurm runs the job scripts on a private "
         "single-node cluster (driver, bin dir and sim chips set the same way)",
         elsewhere=(("tests/deploy/slurm.sh", "chipd.sbatch"),
                    ("tests/deploy/slurm_lib.sh", "CHIPD_BIN_DIR="))),
    Rule(r"docs/operations\.md",
         r"^(adduser --system|systemctl |sudo -u chipd )|/etc/systemd/system/|>/etc/default/",
         "root and a running systemd; deploy_systemd_notify runs chipd under the notify "
         "protocol as the unit does and verifies the unit files",
         elsewhere=(("tests/deploy/systemd_notify.sh", "NOTIFY_SOCKET"),
                    ("tests/deploy/systemd_notify.sh", "systemd-analyze verify"))),
    Rule(r"docs/operations\.md", r"^groupadd \S+ && usermod -aG ",
         "root, and changes the machine's accounts; deploy_allow_group makes a group and "
         "accounts (and removes them) and runs chipd --allow-group as one of them",
         elsewhere=(("tests/deploy/allow_group.sh", 'groupadd "$grp"'),
                    ("tests/deploy/allow_group.sh", 'usermod -aG "$grp"'),
                    ("tests/deploy/allow_group.sh", '--allow-group "$grp"'))),
    Rule(r"docs/operations\.md", r"^CHIPD_USER=chipd ",
         "no chipd account here: the block's chipd runs as the test's own user, whom "
         "CHIPD_USER names instead (deploy_allow_group runs these as another uid)",
         sub=(r"^CHIPD_USER=chipd ", 'CHIPD_USER="$(id -un)" ')),
    Rule(r"docs/operations\.md|docs/chipd\.8", r"(^|\s)chipd (.*\s)?--backend hip\b",
         "no GPU here: --print-config resolves every setting (backend, one worker per "
         "GPU of the visibility mask, set to two GPUs) and exits; tests/gpu/run.sh runs "
         "the HIP build where a GPU is",
         sub=(r"(^|\s)chipd ((?:.*\s)?--backend hip\b)",
              r"\1ROCR_VISIBLE_DEVICES=0,1 chipd \2 --print-config")),
    # docs/chipd.8
    Rule(r"docs/chipd\.8", r"^srun ",
         "no Slurm here: chipd runs without the srun step around it; deploy_slurm runs "
         "chipd as such a step",
         sub=(r"^srun (--?[\w-]+(=\S+)? )*", "")),
    # docs/chipctl.1
    Rule(r"docs/chipctl\.1", r"/var/lib/prometheus/node-exporter\b",
         "Debian node_exporter's textfile directory (root, exists where node_exporter runs): "
         "a scratch directory made beforehand; the file must appear in it",
         sub=(r"/var/lib/prometheus/node-exporter\b", "$CHIPD_EX_TMP/textfile"),
         check_file="$CHIPD_EX_TMP/textfile/chipd.prom"),
    Rule(r"docs/chipctl\.1", r"\bbuild/tests/test_callables/",
         "the test suite's callables of the build under test, wherever it is",
         sub=(r"\bbuild/tests/test_callables/", "$CHIPD_EX_BUILD/tests/test_callables/")),
    Rule(r"docs/chipctl\.1", r"/tmp/chipd\.trace\.json",
         "one fixed path for every concurrent run of this test: a scratch file",
         sub=(r"/tmp/chipd\.trace\.json", "$CHIPD_EX_TMP/chipd.trace.json"),
         check_file="$CHIPD_EX_TMP/chipd.trace.json"),
    # docs/reliability.md
    Rule(r"docs/reliability\.md", r"^cmake -S \. -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo",
         "a second build of the tree; the build under test is one (the test command "
         "configures it this way)",
         elsewhere=(("deploy/check.sh", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"),)),
    Rule(r"docs/reliability\.md", r"^cd build$",
         "the build under test stands in for the block's build",
         sub=(r"^cd build$", 'cd "$CHIPD_EX_BUILD"')),
    Rule(r"docs/reliability\.md", r"^ctest -L (fault|fuzz) ",
         "ctest inside ctest; the test command runs these labels' tests",
         elsewhere=(("deploy/check.sh", "ctest --output-on-failure"),
                    ("tests/fault.cmake", "LABELS fault"), ("tests/fault.cmake", "LABELS fuzz"))),
    Rule(r"docs/reliability\.md", r"FT_LOAD_REQUESTS=1000 ",
         "the full load runs for minutes: the same command with 2 requests per client "
         "(ctest's check_load runs 50)",
         sub=(r"FT_LOAD_REQUESTS=1000 ", "FT_LOAD_REQUESTS=2 ")),
    Rule(r"docs/reliability\.md", r"^\.\./tests/fuzz/run\.sh 600 ",
         "ten minutes of libFuzzer; ctest's fuzz_region runs the same script for 60 s",
         elsewhere=(("tests/fault.cmake", "fuzz/run.sh 60"),)),
    Rule(r"docs/reliability\.md", r"-DCHIPD_SANITIZE=|^\(cd \.\./build-tsan ",
         "two more builds of the tree; the test command runs every suite in both",
         elsewhere=(("deploy/check.sh", "-DCHIPD_SANITIZE=address,undefined"),
                    ("deploy/check.sh", "-DCHIPD_SANITIZE=thread"),
                    ("deploy/check.sh", "setarch $(uname -m) -R"))),
    # deploy/prometheus/README.md
    Rule(r"deploy/prometheus/README\.md", r"/etc/systemd/system/|^systemctl ",
         "root and a running systemd; deploy_systemd_notify verifies the unit "
         "(systemd-analyze verify)",
         elsewhere=(("tests/deploy/systemd_notify.sh", "prometheus/chipd-export.service"),
                    ("tests/deploy/systemd_notify.sh", "systemd-analyze verify"))),
    Rule(r"deploy/prometheus/README\.md", r"^chgrp chipd ",
         "no chipd user or group here (adduser --system needs root): the test's own group",
         sub=(r"^chgrp chipd ", 'chgrp "$(id -gn)" ')),
    Rule(r"deploy/prometheus/README\.md", r"/var/lib/prometheus/node-exporter\b",
         "node_exporter's textfile directory (root, exists where node_exporter runs): "
         "a scratch directory made beforehand",
         sub=(r"/var/lib/prometheus/node-exporter\b", "$CHIPD_EX_TMP/textfile")),
    Rule(r"deploy/prometheus/README\.md", r"^srun .*\bchipctl export ",
         "no Slurm here: the exporter runs without the srun step around it, beside the "
         "block's chipd; the file must appear in the textfile directory",
         sub=(r"^srun (--?[\w-]+(=\S+)? )*", ""),
         check_file="$CHIPD_EX_TMP/textfile/chipd.prom"),
    Rule(r"deploy/prometheus/README\.md", r"\bpromtool ",
         "promtool (Debian's prometheus) is not on every machine that runs this test; "
         "deploy_prom_rules runs both commands, skipped without promtool",
         elsewhere=(("tests/deploy/prom_rules.sh", 'promtool check rules "$prom/chipd.rules.yml"'),
                    ("tests/deploy/prom_rules.sh",
                     '(cd "$prom" && promtool test rules chipd.rules.test.yml)'))),
    # proto/python/README.md
    Rule(r"proto/python/README\.md", r"^python3 -m pip install ",
         "installs into the machine's Python, and setuptools writes build/ and *.egg-info "
         "into proto/python; python_client's test_install.py runs the same pip install "
         "of a copy into a scratch folder and imports chipd from there",
         elsewhere=(("tests/python/test_install.py",
                     '"install", "--no-build-isolation", "--no-index"'),)),
    # tests/README.md
    Rule(r"tests/README\.md", r"^ctest ",
         "ctest inside ctest (the fault label runs for minutes, valgrind included); the "
         "test command runs every test",
         elsewhere=(("deploy/check.sh", "ctest --output-on-failure"),
                    ("tests/CMakeLists.txt", "chipd_check(check_wait)"),
                    ("tests/fault.cmake", "LABELS fault"))),
    Rule(r"tests/README\.md", r"^CK_RUN_CASE=\w+ tests/check_\w+\b",
         "the block runs in a build directory: the build under test",
         sub=(r"^(CK_RUN_CASE=\w+ )tests/", r'\1"$CHIPD_EX_BUILD"/tests/')),
]


@dataclass
class Expect:
    """What the blocks of a document with a tag must print (regexes, each matching
    some line of the block's standard output), with the document's words it stands
    for."""

    files: str  # regex the document's path (from the root) matches whole
    tag: str  # the blocks' tag: python, sh, console, roff (a shell block: all its lines)
    why: str
    lines: tuple[str, ...]
    used: int = 0

    def covers(self, path: str, tag: str) -> bool:
        return tag == self.tag and re.fullmatch(self.files, path) is not None


EXPECT = [
    Expect(r"README\.md", "python",
           "it prints the status, the tokens with the last marked final, and the refusal "
           "of the unknown workload",
           (r"state='ready'", r"^\d+ \d+ final$", r"^refused: bad_request ")),
    Expect(r"docs/examples/markov/README\.md", "sh",
           "the example's request streams the CPU walk's tokens: the last of the 16 "
           "from chipctl (ID SEQ VALUE) and from markov-ref; registered under a second "
           "name while the node runs, it streams them again, then it is unregistered",
           (r"^@\d+ 15 952$", r"^952$", r"^callable markov_live \(version 1\) registered from ",
            r"^callable markov_live unregistered$")),
    Expect(r"tests/README\.md", "sh",
           "CK_RUN_CASE runs the tcase it names: Check runs none, and exits 0, for a name "
           "the suite does not have",
           (r"\d+%: Checks: [1-9]\d*, Failures: 0, Errors: 0$",)),
]

# Values of the man pages' \fI...\fP placeholders inside examples.
PLACEHOLDERS = {
    "NAME": '"$CHIPD_INSTANCE"',
    "INSTANCE": '"$CHIPD_INSTANCE"',
    "FILE": '"$CHIPD_EX_TMP/file"',
    "DIR": '"$CHIPD_EX_TMP/dir"',
}

