# code-runner's installer of the operator's python_packages (run by the host's
# python3, never by a guest): resolves the requirements with pip against the
# package index into a lock with hashes, downloads exactly the locked wheels,
# checks each one's sha256, refuses any wheel with compiled code, and unpacks
# them, bounded, into <out>/site-packages.
#
# usage: python3 -c <this> <out> <wheel-cache> <python-version> <stack> <requirement>...
# <out> is a fresh empty directory; the caller renames it into place only when
# this exits 0. A failure exits 2 with one line on stderr naming the package.
# <stack> is the data interpreter's MANIFEST, or "-" (the lean interpreter):
# its distributions are resolved against as they are (exact versions, never
# fetched), so a pure package depending on numpy or pandas installs when the
# stack satisfies it, one the stack has is "provided", and one whose
# requirements the stack cannot meet is refused naming the conflict.
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile

# What one wheel may hold (declared sizes: zipfile reads no more than them).
MAX_ENTRIES = 10_000
MAX_FILE_BYTES = 64 << 20
MAX_WHEEL_BYTES = 256 << 20
MAX_TOTAL_BYTES = 1 << 30
MAX_NAME = 512
MAX_COMPONENT = 255
# Files that are compiled code for some machine: never loadable in WebAssembly.
COMPILED = re.compile(r"\.(so|pyd|dll|dylib|a|o|lib|exe)$|\.so\.", re.IGNORECASE)
PURE_TARGET = ["--only-binary=:all:", "--platform", "any", "--implementation", "py",
               "--abi", "none"]


class Refused(Exception):
    pass


def pip(*args):
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)


def pip_error(proc):
    lines = [l for l in proc.stderr.splitlines() if l.startswith("ERROR")]
    return (lines[-1] if lines else proc.stderr.strip()[-2000:]) or f"pip exited {proc.returncode}"


def unresolved_name(proc):
    for line in proc.stderr.splitlines():
        m = re.search(r"No matching distribution found for (\S+)", line)
        if m:
            return m.group(1)
    return None


# Where to look for a compiled wheel when no pure one exists: this machine's
# python first, then common CPython targets (a pinned old release has wheels
# only for the pythons of its day).
DIAGNOSE_TARGETS = [[]] + [
    ["--python-version", v, "--implementation", "cp", "--abi", f"cp{v.replace('.', '')}",
     "--abi", "abi3", "--platform", "manylinux2014_x86_64", "--platform",
     "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64", "--platform",
     "macosx_11_0_arm64", "--platform", "win_amd64"]
    for v in ("3.14", "3.13", "3.12", "3.11", "3.10", "3.9", "3.8")
]


LEAN_HINT = {"numpy", "pandas", "scipy", "matplotlib", "scikit-learn", "statsmodels"}


def why_unresolved(requirement, work, stack):
    # Is there a wheel at all, just not a pure one? Ask for any wheel of it
    # (wheels only: an sdist would run the package's build code here).
    report = os.path.join(work, "diagnose.json")
    for target in DIAGNOSE_TARGETS:
        proc = pip("install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
                   "--only-binary=:all:", *target, "--target", os.path.join(work, "t"),
                   "--report", report, requirement)
        if proc.returncode == 0 or unresolved_name(proc) is None:
            break
    if proc.returncode == 0:
        with open(report) as f:
            wheels = [os.path.basename(i["download_info"]["url"]) for i in json.load(f)["install"]]
        name = base_name(requirement)
        hint = ("; the data interpreter (python_interpreter: data) has it in its stack, and "
                "installs pure packages that depend on it" if not stack and name in LEAN_HINT
                else "")
        return (f"python_packages: {requirement} is refused: it has only wheels with compiled "
                f"code (e.g. {', '.join(wheels)}), and code-runner's python runs in WebAssembly, "
                f"which loads pure-Python wheels (py3-none-any) only{hint}")
    return (f"python_packages: {requirement} cannot be installed: no pure-Python wheel of it "
            f"was found on the package index (unknown name or version, or no wheel of it is "
            f"pure Python); pip said: {pip_error(proc)}")


def normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def base_name(requirement):
    """The normalised distribution name a requirement names."""
    return normalise(re.split(r"[<>=!~;\[ (]", requirement, 1)[0])


def read_stack(manifest):
    """The data stack's distributions, {normalised name: (name, version)}."""
    stack = {}
    with open(manifest) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "package":
                stack[normalise(parts[1])] = (parts[1], parts[2])
    return stack


def stack_index(stack, work):
    """pip's view of the stack: a wheel per distribution holding only its
    name and version (found with --find-links, never installed), and a
    constraint pinning each to the stack's version."""
    links = os.path.join(work, "stack")
    os.makedirs(links)
    constraints = os.path.join(work, "stack-constraints.txt")
    with open(constraints, "w") as out:
        for name, version in stack.values():
            out.write(f"{name}=={version}\n")
            stem = f"{re.sub(r'[-.]+', '_', name)}-{version}"
            with zipfile.ZipFile(os.path.join(links, f"{stem}-py3-none-any.whl"), "w") as z:
                info = f"{stem}.dist-info"
                z.writestr(f"{info}/METADATA",
                           f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
                z.writestr(f"{info}/WHEEL",
                           "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
                z.writestr(f"{info}/RECORD", "")
    return ["--find-links", links, "--constraint", constraints]


def conflict(proc, requirements, stack):
    """A refusal naming what cannot be met beside the data stack."""
    caused = []
    lines = proc.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("The conflict is caused by"):
            for cause in lines[i + 1:]:
                if not cause.startswith(" "):
                    break
                caused.append(cause.strip())
    fixed = sorted({f"{n} {v}" for key, (n, v) in stack.items()
                    if any(re.search(rf"(?i)\b{re.escape(n)}\b", c) for c in caused)})
    return (f"python_packages: {' '.join(requirements)} cannot be installed on the data "
            f"interpreter: it conflicts with the data stack, whose distributions are fixed "
            f"({', '.join(fixed) or 'see pip'}); pip said: {'; '.join(caused) or pip_error(proc)}")


def resolve(requirements, python_version, work, stack):
    report = os.path.join(work, "report.json")
    on_stack = stack_index(stack, work) if stack else []
    proc = pip("install", "--dry-run", "--ignore-installed", *PURE_TARGET,
               "--python-version", python_version, "--target", os.path.join(work, "t"),
               "--report", report, *on_stack, "--", *requirements)
    if proc.returncode != 0:
        if stack and "ResolutionImpossible" in proc.stderr:
            raise Refused(conflict(proc, requirements, stack))
        name = unresolved_name(proc)
        if name is not None:
            why = why_unresolved(name, work, stack)
            if base_name(name) not in {base_name(r) for r in requirements}:
                why = why.replace(f"python_packages: {name} ", f"python_packages: {name} (which {' '.join(requirements)} needs) ", 1)
            raise Refused(why)
        raise Refused(f"python_packages: pip could not resolve {' '.join(requirements)}: "
                      f"{pip_error(proc)}")
    with open(report) as f:
        items = json.load(f)["install"]
    lock, provided = [], []
    for item in items:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if normalise(name) in stack:
            # The stack's own (its version, by the constraint): imported
            # from the stack, never fetched.
            provided.append((name, version))
            continue
        info = item["download_info"]
        digest = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
        if not digest:
            raise Refused(f"python_packages: {name} {version}: the index gave no sha256 for "
                          f"{info.get('url')}")
        lock.append((name, version, digest, os.path.basename(info["url"])))
    return sorted(lock, key=lambda entry: entry[0].lower()), sorted(provided)


def check_tag(name, wheel):
    parts = wheel[:-len(".whl")].split("-") if wheel.endswith(".whl") else []
    if len(parts) not in (5, 6):
        raise Refused(f"python_packages: {name}: {wheel} is not a wheel")
    py, abi, platform = parts[-3:]
    if abi != "none" or platform != "any" or not all(t.startswith("py") for t in py.split(".")):
        raise Refused(f"python_packages: {name} is refused: its wheel {wheel} is tagged "
                      f"{py}-{abi}-{platform}, i.e. built for a particular interpreter or machine "
                      "(compiled code); only pure-Python wheels (py3-none-any) are installed")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def safe_parts(name, wheel):
    if (not name or len(name) > MAX_NAME or "\\" in name or "\0" in name
            or name.startswith("/") or re.match(r"^[A-Za-z]:", name)):
        raise Refused(f"python_packages: {wheel} holds an unsafe path {name[:200]!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." or len(p) > MAX_COMPONENT for p in parts):
        raise Refused(f"python_packages: {wheel} holds an unsafe path {name[:200]!r}")
    return parts


def unpack(name, path, site, budget):
    wheel = os.path.basename(path)
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as err:
        raise Refused(f"python_packages: {name}: {wheel} is not a zip: {err}")
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ENTRIES:
            raise Refused(f"python_packages: {name}: {wheel} has {len(infos)} entries "
                          f"(at most {MAX_ENTRIES})")
        declared = 0
        for info in infos:
            if info.file_size > MAX_FILE_BYTES:
                raise Refused(f"python_packages: {name}: {wheel}: {info.filename} is "
                              f"{info.file_size} bytes (at most {MAX_FILE_BYTES})")
            declared += info.file_size
            if stat.S_ISLNK(info.external_attr >> 16):
                raise Refused(f"python_packages: {name}: {wheel} holds a symlink, {info.filename}")
            if COMPILED.search(info.filename):
                raise Refused(f"python_packages: {name} is refused: {wheel} holds compiled code "
                              f"({info.filename}), which code-runner's python (WebAssembly) "
                              "cannot load; only pure-Python wheels are installed")
        if declared > MAX_WHEEL_BYTES:
            raise Refused(f"python_packages: {name}: {wheel} unpacks to {declared} bytes "
                          f"(at most {MAX_WHEEL_BYTES})")
        budget[0] -= declared
        if budget[0] < 0:
            raise Refused(f"python_packages: the wheels unpack to more than {MAX_TOTAL_BYTES} "
                          f"bytes (at {name})")
        meta = [i for i in infos if re.fullmatch(r"[^/]+\.dist-info/WHEEL", i.filename)]
        if len(meta) != 1:
            raise Refused(f"python_packages: {name}: {wheel} has no single .dist-info/WHEEL")
        text = archive.read(meta[0]).decode("utf-8", "replace")
        if not re.search(r"^Root-Is-Purelib:\s*true\s*$", text, re.MULTILINE | re.IGNORECASE):
            raise Refused(f"python_packages: {name} is refused: {wheel} is not a purelib "
                          "wheel (Root-Is-Purelib is not true): it is built for a platform")
        for info in infos:
            parts = safe_parts(info.filename, wheel)
            if not parts:
                continue
            if parts[0].endswith(".data"):
                # purelib/platlib go to the root; scripts, headers and data are not importable.
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            target = os.path.join(site, *parts)
            if info.is_dir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                out = open(target, "xb")
            except FileExistsError:
                raise Refused(f"python_packages: {name}: {wheel} writes {'/'.join(parts)}, "
                              "which another wheel (or entry) already wrote")
            with out, archive.open(info) as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)


def main():
    out, cache, python_version, manifest, *requirements = sys.argv[1:]
    work = os.path.join(out, ".work")
    os.makedirs(work)
    stack = read_stack(manifest) if manifest != "-" else {}
    lock, provided = resolve(requirements, python_version, work, stack)
    for name, _, _, wheel in lock:
        check_tag(name, wheel)
    lock_text = "".join(f"{n}=={v} --hash=sha256:{d}\n" for n, v, d, _ in lock)
    with open(os.path.join(out, "lock.txt"), "w") as f:
        f.write(lock_text)
    proc = pip("download", "--quiet", "--no-deps", "--require-hashes", *PURE_TARGET,
               "--python-version", python_version, "--dest", cache,
               "--requirement", os.path.join(out, "lock.txt")) if lock else None
    if proc is not None and proc.returncode != 0:
        raise Refused(f"python_packages: downloading the locked wheels failed: {pip_error(proc)}")
    site = os.path.join(out, "site-packages")
    os.makedirs(site)
    budget = [MAX_TOTAL_BYTES]
    installed = []
    for name, version, digest, wheel in lock:
        path = os.path.join(cache, wheel)
        if not os.path.isfile(path) or sha256(path) != digest:
            raise Refused(f"python_packages: {name} {version}: {wheel} does not match the "
                          f"lock's sha256 {digest}")
        unpack(name, path, site, budget)
        installed.append({"name": name, "version": version, "sha256": digest, "wheel": wheel})
    with open(os.path.join(out, "installed.json"), "w") as f:
        json.dump({"requirements": requirements, "installed": installed,
                   "provided": [{"name": n, "version": v} for n, v in provided]}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Refused as err:
        print(err, file=sys.stderr)
        sys.exit(2)
