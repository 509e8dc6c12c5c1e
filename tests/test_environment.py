"""The two install routes (pip with pyproject.toml, conda with environment.yml) pin the same versions."""
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
