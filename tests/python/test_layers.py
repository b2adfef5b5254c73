"""Issue 42: the package's modules import each other as a DAG, every import at the top.

The imports are read from the source (ast), not run: a circle between two modules, or an import of
a pxvm module inside a function (the way a circle used to be hidden), fails here, naming it. The
only imports inside functions are of optional heavy dependencies, listed in ALLOWED with why."""
import ast
import os
import sys

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "pxvm")

#: (module, what it imports) imported inside a function, and why
ALLOWED = {
    # the compiled fast path is optional (no python3-dev) and may be another build (PXVM_NATIVE_SO):
    # it is loaded only when PXVM_NO_NATIVE allows it
    ("pxvm._nativeload", "pxvm._native"): "optional compiled extension, loaded when the environment allows it",
}
#: third-party modules that may be imported inside a function: optional, or seconds to import
OPTIONAL = {"torch": "optional, seconds to import", "cupy": "optional", "tqdm": "optional",
            "PIL": "optional (images from Pillow)", "numpy": "imported on first use (_arrays._np)"}


def modules():
    """{dotted name: path} of every module of the package."""
    found = {}
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, f), PACKAGE)[:-3].replace(os.sep, ".")
                name = "pxvm" if rel == "__init__" else "pxvm." + rel.removesuffix(".__init__")
                found[name] = os.path.join(root, f)
    return found


def _resolve(module, node, is_package, mods):
    """The absolute names a From/Import node imports: `from . import x` names pxvm.x when that is a
    module of the package (or the compiled pxvm._native), else the package itself."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level == 0:
        return [node.module]
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    prefix = ".".join(base + ([node.module] if node.module else []))
    names = [prefix + "." + a.name for a in node.names]
    found = [n for n in names if n in mods or n == "pxvm._native"]
    return found + ([prefix] if len(found) < len(names) else [])


def imports(name, path, mods=()):
    """(top-level imports, imports inside a function or class body): [(imported, line)]."""
    tree = ast.parse(open(path).read(), path)
    is_package = path.endswith("__init__.py")
    top, inner = [], []

    def visit(node, depth, type_checking):
        for child in ast.iter_child_nodes(node):
            nested = depth + isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            tc = type_checking or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and not tc:
                for imported in _resolve(name, child, is_package, mods):
                    (inner if depth else top).append((imported, child.lineno))
            visit(child, nested, tc)
    visit(tree, 0, False)
    return top, inner


def graph():
    mods = modules()
    edges, inner = {}, []
    for name, path in mods.items():
        top, nested = imports(name, path, mods)
        edges[name] = {m for m, _ in top if m in mods and m != name}
        inner += [(name, m, line, path) for m, line in nested]
    return mods, edges, inner


def test_no_pxvm_module_is_imported_inside_a_function():
    mods, _, inner = graph()
    bad = ["%s:%d imports %s inside a function" % (os.path.relpath(path, PACKAGE), line, m)
           for name, m, line, path in inner
           if (m.startswith("pxvm.") or m == "pxvm") and (m in mods or m == "pxvm._native")
           and (name, m) not in ALLOWED]
    assert not bad, "\n".join(bad)


def test_only_optional_dependencies_are_imported_inside_functions():
    _, _, inner = graph()
    stdlib = sys.stdlib_module_names
    bad = ["%s:%d imports %s" % (os.path.relpath(path, PACKAGE), line, m) for name, m, line, path in inner
           if not m.startswith("pxvm") and m.split(".")[0] not in OPTIONAL and m.split(".")[0] not in stdlib]
    assert not bad, "\n".join(bad)


def test_the_modules_import_each_other_without_a_circle():
    _, edges, _ = graph()
    state, stack, circles = {}, [], []

    def walk(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == "open":
                circles.append(" -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                walk(n)
        stack.pop()
        state[m] = "done"
    for m in sorted(edges):
        if m not in state:
            walk(m)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_check_finds_a_circle_and_a_hidden_import(tmp_path):
    """The checks themselves: a circle of two modules and an import inside a function are seen."""
    a = tmp_path / "a.py"
    a.write_text("from . import b\n\ndef f():\n    from .c import g\n    return g\n")
    top, inner = imports("pxvm.a", str(a), {"pxvm.a", "pxvm.b", "pxvm.c"})
    assert ("pxvm.b", 1) in top and ("pxvm.c", 4) in inner
