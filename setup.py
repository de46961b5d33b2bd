"""Maps the import names ``odradek.*`` onto the repository layout.

``shared/odradek`` is the common library; each ``services/<name>`` is the package
``odradek.<name>``. Works for editable and wheel installs alike.
"""

from pathlib import Path

from setuptools import Extension, find_packages, setup

ROOT = Path(__file__).parent
SERVICES = sorted(p.name for p in (ROOT / "services").iterdir() if (p / "__init__.py").exists())

package_dir = {"odradek": "shared/odradek"}
packages = find_packages("shared", include=["odradek", "odradek.*"])
for name in SERVICES:
    package_dir[f"odradek.{name}"] = f"services/{name}"
    packages.append(f"odradek.{name}")
    packages += [f"odradek.{name}.{sub}" for sub in find_packages(f"services/{name}")]

package_data = {
    "": ["py.typed", "*.pyi", "*.json"],
    "odradek.console": ["templates/*.html", "static/*.css", "static/*.js"],  # the web console
}
# The validator's record walk in C (odradek.log._scan) and the pipeline's record
# columns (odradek.records._columns); optional: without a compiler the install still
# succeeds and the same work runs in Python (odradek.log.validator,
# odradek.pipeline.record_columns and batch_encoder).
ext_modules = [
    Extension("odradek.log._scan", ["shared/odradek/log/_scan.c"], optional=True),
    Extension("odradek.records._columns", ["shared/odradek/records/_columns.c"], optional=True),
]
setup(
    packages=packages,
    package_dir=package_dir,
    package_data=package_data,
    ext_modules=ext_modules,
)
