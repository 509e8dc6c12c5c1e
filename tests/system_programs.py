"""Programs some tests need from the distribution's packages (Chromium for bertviz's views, bubblewrap for the
grader's walls): found on PATH, else installed with apt-get where the tests may (root, Debian or Ubuntu)."""
import os
import shutil
import subprocess


def program(name: str, package: str) -> tuple[str | None, str]:
    """(the path of ``name``, "") once it is installed; (None, why not and how to install it) otherwise."""
    found = shutil.which(name)
    if found:
        return found, ""
    how = f"install it (Debian: sudo apt-get install {package})"
    if os.name != "posix" or os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, f"{name} is not installed: {how}"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # two test workers may install at once: apt-get then waits for the other's lock instead of failing
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    install = [*apt, "install", "-y", "--no-install-recommends", package]
    try:
        if subprocess.run(install, env=env, capture_output=True, timeout=900).returncode != 0:
            subprocess.run([*apt, "update"], env=env, capture_output=True, timeout=900)  # a stale package list
            result = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
            if result.returncode != 0:
                return None, f"{package} could not be installed with apt-get: {result.stderr.strip()[-400:]}"
    except subprocess.TimeoutExpired:
        return None, f"installing {package} with apt-get took more than 15 minutes"
    found = shutil.which(name)
    return (found, "") if found else (None, f"apt-get installed {package} but {name} is not on PATH")
