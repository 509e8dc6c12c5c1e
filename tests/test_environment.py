"""The two install routes (pip with pyproject.toml, conda with environment.yml) pin the same versions."""
import os
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values()
                                              for r in extra]
    return {Requirement(r).name.lower(): str(Requirement(r).specifier) for r in requirements}


def conda_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {Requirement(r).name.lower(): str(Requirement(r).specifier) for r in pip if not r.startswith("-e")}


def test_every_dependency_is_pinned_exactly():
    for name, spec in pyproject_pins().items():
        assert spec.startswith("==") and "," not in spec, f"{name} is not pinned to one version: {spec!r}"


def test_conda_and_pip_pin_the_same_versions():
    assert conda_pins() == pyproject_pins()


def test_python_versions_agree():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11" and conda_python == "python=3.11"


@pytest.mark.parametrize("name, spec", sorted(pyproject_pins().items()))
def test_installed_versions_are_the_tested_pins(name, spec):
    try:
        installed = Version(version(name)).public  # "2.13.0+cpu" is torch 2.13.0
    except PackageNotFoundError:
        pytest.fail(f"{name} is not installed; run the README's install command")
    assert installed == spec.removeprefix("=="), f"{name} {installed} is installed but {spec} is pinned"


def _course_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("course_script", ROOT / "course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_linux_without_a_gpu_installs_torch_from_the_cpu_index_then_falls_back(monkeypatch):
    course = _course_script()
    pin = course.torch_pin()
    monkeypatch.setattr(course.sys, "platform", "linux")
    monkeypatch.delenv("MINIBERT_TORCH_DEFAULT_INDEX", raising=False)
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: False)
    first, fallback = course.torch_installs()
    assert first[:3] == [pin, "--index-url", "https://download.pytorch.org/whl/cpu"] and fallback == [pin]
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: True)
    assert course.torch_installs() == [[pin]]  # a GPU: PyPI's CUDA build
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(course.sys, "platform", "darwin")
    assert course.torch_installs() == [[pin]]  # PyPI's macOS wheel is a CPU build already


def test_the_student_releases_lab_has_no_nbgrader_menus(tmp_path, monkeypatch):
    """Judged by Jupyter's own extension lists, with the config folder course.py lab uses in a release."""
    import os
    import subprocess
    import sys
    course = _course_script()
    monkeypatch.setattr(course, "ROOT", tmp_path)
    folder = course.student_jupyter_config()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(folder), "NO_COLOR": "1"}
    jupyter = [sys.executable, "-m", "jupyter"]
    server = subprocess.run([*jupyter, "server", "extension", "list"], env=env, capture_output=True, text=True)
    lab = subprocess.run([*jupyter, "labextension", "list"], env=env, capture_output=True, text=True)
    listed = server.stdout + server.stderr + lab.stdout + lab.stderr
    for name in ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.assignment_list",
                 "@jupyter/nbgrader v"):
        line = next(line for line in listed.splitlines() if name in line)
        assert "disabled" in line, line
    assert "jupyterlab" in listed and "enabled" in listed  # the rest of the lab is there


@pytest.mark.skipif(os.name != "posix", reason="Windows has no exec that keeps the process")
def test_course_py_becomes_the_command_so_a_stop_reaches_it():
    """`course.py lab`, `test` and `run` used to wait for Jupyter, pytest or the command as a child: a `kill` or
    a closed terminal ended course.py alone and left the child running. Now course.py becomes the command
    (same process id), so whatever stops it stops the command; and the command's exit status is its own."""
    import subprocess
    import sys
    launcher = subprocess.Popen([sys.executable, str(ROOT / "course.py"), "run", "python", "-c",
                                 "import os, sys; print(os.getpid()); sys.exit(3)"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    printed, _ = launcher.communicate(timeout=600)
    assert launcher.returncode == 3
    assert printed.split()[-1] == str(launcher.pid)
