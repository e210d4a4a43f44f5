"""An import-linter contract of skdp's own: private modules stay private.

``lint-imports`` (run from the repository root, which it puts on the path)
loads the contract type registered in ``pyproject.toml``. A module whose name
has a private part (``skdp.privacy._random``: the part ``_random``) may be
imported only from inside the package that holds that part
(``skdp.privacy``). A package shares what others need through its public
names (``skdp.privacy.normal_``); ``skdp._fit`` and the top-level private
modules of ``skdp`` (``skdp._groups``...) are private to ``skdp`` and so
open to all of it.
"""

from importlinter import Contract, ContractCheck, fields, output


def _owner(module):
    """The package a module's first private part belongs to, or None for a
    public module: ``skdp.privacy._random`` -> ``skdp.privacy``."""
    parts = module.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _inside(module, package):
    return module == package or module.startswith(package + ".")


class PrivateModulesContract(Contract):
    """No module imports a private module of a package it is not in.

    Configuration: ``containers``, the root packages to check (e.g.
    ``["skdp"]``); ``ignore_imports``, importer -> imported pairs allowed
    anyway (``"a.b -> c._d"``).
    """

    type_name = "private_modules"

    containers = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph, verbose):
        allowed = set()
        for line in self.ignore_imports or ():
            importer, _, imported = (part.strip() for part in line.partition("->"))
            allowed.add((importer, imported))
        violations = []
        for container in self.containers:
            for imported in sorted(graph.find_descendants(container)):
                owner = _owner(imported)
                if owner is None:
                    continue
                for importer in sorted(graph.find_modules_that_directly_import(imported)):
                    if _inside(importer, owner) or (importer, imported) in allowed:
                        continue
                    violations.append((importer, imported, owner))
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check):
        for importer, imported, owner in check.metadata["violations"]:
            output.print_error(
                f"{importer} imports {imported}, private to {owner}: use a public name of "
                f"{owner}.")
            output.new_line()
