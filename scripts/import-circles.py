#!/usr/bin/env python3
"""Import circles between the source files of each Rust crate in the workspace.

Usage:
    scripts/import-circles.py [CRATE_DIR ...]   # default: every workspace member
    scripts/import-circles.py --self-test

For each crate it maps every `src/**/*.rs` file to its module path (from the crate
roots `src/lib.rs`, `src/main.rs` and `src/bin/*.rs`, following `mod name;` and
`#[path]`), reads the paths a file names (`use crate::...`, `use super::...`,
`use self::...`, grouped `use crate::{a::B, c::d}`, `pub use`, and `crate::x::y`,
`super::x`, `child::x` written in code) and resolves each to the file that defines
the module: the longest prefix that is a module; an item path `crate::a::B` points at
the file of module `a`. A name another module imports (`use`, including `pub use`
re-exports) is followed to where it comes from, so `crate::Error` re-exported by
`lib.rs` from `error.rs` points at `error.rs`. Declaring `mod child;` is not an
import; a child that uses `super::X` imports its parent, a parent that uses
`child::X` imports the child.

It prints every strongly connected component of more than one file of the resulting
graph, with the imports that close it, and exits 1 when there is any. Comments,
strings and `$crate` paths are not imports.
"""

import os
import re
import sys
import tempfile

# ---------------------------------------------------------------------------
# Tokens


def tokens(text):
    """Yields (kind, value, line): kind is 'id', 'str', '::' or 'p' (one character).

    Comments (also doc comments: an intra-doc link is not an import), char literals
    and lifetimes are dropped; string literals come back as one 'str' token so that
    `#[path = "..."]` can be read.
    """
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += text[i] == "\n"
                    i += 1
        elif (m := re.compile(r'b?r(#*)"').match(text, i)) is not None:
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            yield ("str", text[m.end() : j - len(end)], line)
            line += text.count("\n", i, j)
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i)):
            j = i + (2 if c == "b" else 1)
            start = j
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            yield ("str", text[start:j], line)
            line += text.count("\n", i, j)
            i = j + 1
        elif c == "'" or (c == "b" and text.startswith("b'", i)):
            # A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a, 'static).
            j = i + (2 if c == "b" else 1)
            m = re.compile(r"\\(u\{[0-9a-fA-F_]*\}|x[0-9a-fA-F]{2}|.)'|[^\\\n]'").match(text, j)
            if m is not None:
                i = m.end()
            else:
                m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(text, j)
                i = m.end() if m else j
        elif c.isalpha() or c == "_":
            m = re.compile(r"(r#)?[A-Za-z_][A-Za-z0-9_]*").match(text, i)
            yield ("id", m.group(0).removeprefix("r#"), line)
            i = m.end()
        elif c.isdigit():
            m = re.compile(r"[0-9][0-9A-Za-z_]*(\.[0-9][0-9A-Za-z_]*)?").match(text, i)
            i = m.end()
        elif text.startswith("::", i):
            yield ("::", "::", line)
            i += 2
        else:
            yield ("p", c, line)
            i += 1


# ---------------------------------------------------------------------------
# One crate's module tree


class Module:
    def __init__(self, path, file, directory):
        self.path = path  # tuple of names, () for the crate root
        self.file = file  # the file that holds it (its own, or the parent's if inline)
        self.directory = directory  # where `mod child;` looks for child files
        self.children = set()
        self.imports = {}  # name -> absolute path (tuple), from `use` lines
        self.refs = []  # (segments, line, is_use, text)


def expand_use(toks, k):
    """Parses a use tree starting at toks[k]; returns (list of (segments, alias), next k).

    Handles `a::b::C`, `a::{b, c::D}`, `a::b as c`, `a::*` and `{self, ...}`.
    """
    out = []

    def tree(k, prefix):
        segs = list(prefix)
        if k < len(toks) and toks[k][0] == "::":
            k += 1  # a leading `::` (an extern crate path)
        while k < len(toks):
            kind, val, _ = toks[k]
            if kind == "id":
                segs.append(val)
                k += 1
                if k < len(toks) and toks[k][0] == "::":
                    k += 1
                    continue
                alias = segs[-1]
                if k + 1 < len(toks) and toks[k][1] == "as":
                    alias = toks[k + 1][1]
                    k += 2
                if segs[-1] == "self":
                    segs.pop()
                    alias = segs[-1] if segs else None
                out.append((tuple(segs), alias))
                return k
            if val == "*":
                out.append((tuple(segs), None))
                return k + 1
            if val == "{":
                k += 1
                while k < len(toks) and toks[k][1] != "}":
                    if toks[k][1] == ",":
                        k += 1
                        continue
                    k = tree(k, segs)
                return k + 1
            return k
        return k

    k = tree(k, ())
    return out, k


def parse_file(crate, module, src_root):
    """Reads module.file, registers its modules, child files to read, and references."""
    with open(module.file, encoding="utf-8") as f:
        toks = list(tokens(f.read()))
    scopes = [(module, 0)]
    depth = 0
    pending = []  # child file modules to parse afterwards
    path_attr = None
    k = 0
    while k < len(toks):
        kind, val, line = toks[k]
        cur = scopes[-1][0]
        if val == "{":
            depth += 1
        elif val == "}":
            if len(scopes) > 1 and scopes[-1][1] == depth:
                scopes.pop()
            depth -= 1
        elif val == "#" and k + 4 < len(toks) and toks[k + 1][1] == "[" and toks[k + 2][1] == "path":
            # `#[path = "file.rs"]` on the next `mod`.
            if toks[k + 3][1] == "=" and toks[k + 4][0] == "str":
                path_attr = toks[k + 4][1]
        elif kind == "id" and val == "mod" and k + 2 < len(toks) and toks[k + 1][0] == "id":
            name, after = toks[k + 1][1], toks[k + 2][1]
            child_path = cur.path + (name,)
            cur.children.add(name)
            if after == "{":
                inline = Module(child_path, cur.file, os.path.join(cur.directory, name))
                crate[child_path] = inline
                depth += 1
                scopes.append((inline, depth))
                k += 3
                path_attr = None
                continue
            if after == ";":
                if path_attr is not None:
                    base = os.path.dirname(cur.file) if cur is module else cur.directory
                    file = os.path.normpath(os.path.join(base, path_attr))
                    directory = os.path.dirname(file)
                else:
                    file = os.path.join(cur.directory, name + ".rs")
                    directory = os.path.join(cur.directory, name)
                    if not os.path.exists(file):
                        file = os.path.join(cur.directory, name, "mod.rs")
                if os.path.exists(file):
                    child = Module(child_path, file, directory)
                    crate[child_path] = child
                    pending.append(child)
                path_attr = None
        elif kind == "id" and val == "use" and not (k > 0 and toks[k - 1][1] == "$"):
            trees, end = expand_use(toks, k + 1)
            for segs, alias in trees:
                if segs:
                    cur.refs.append((segs, line, True, "use " + "::".join(segs)))
                if alias and alias != "_" and segs:
                    cur.imports[alias] = segs
            k = end
            continue
        elif kind == "id" and val == "pub" and k + 2 < len(toks) and toks[k + 1][1] == "(" and toks[k + 2][1] == "in":
            # `pub(in crate::a)` names a module it does not import.
            while k < len(toks) and toks[k][1] != ")":
                k += 1
        elif (
            kind == "id"
            and k + 1 < len(toks)
            and toks[k + 1][0] == "::"
            and not (k > 0 and (toks[k - 1][0] == "::" or toks[k - 1][1] in ("$", ".")))
        ):
            segs = [val]
            j = k + 1
            while j + 1 < len(toks) and toks[j][0] == "::" and toks[j + 1][0] == "id":
                segs.append(toks[j + 1][1])
                j += 2
            cur.refs.append((tuple(segs), line, False, "::".join(segs)))
            k = j
            continue
        k += 1
    return pending


def load_crate(crate_dir):
    """Returns (modules by path, per root) for every root of the crate at crate_dir."""
    src = os.path.join(crate_dir, "src")
    roots = [os.path.join(src, f) for f in ("lib.rs", "main.rs")]
    manifest = os.path.join(crate_dir, "Cargo.toml")
    if os.path.isfile(manifest):
        # `[[bin]]` or `[lib]` targets with their own `path = "src/....rs"`.
        with open(manifest, encoding="utf-8") as f:
            for p in re.findall(r'^\s*path\s*=\s*"(src/[^"]+\.rs)"', f.read(), re.M):
                roots.append(os.path.join(crate_dir, p))
    bin_dir = os.path.join(src, "bin")
    if os.path.isdir(bin_dir):
        for f in sorted(os.listdir(bin_dir)):
            p = os.path.join(bin_dir, f)
            roots.append(p if f.endswith(".rs") else os.path.join(p, "main.rs"))
    trees = []
    for root in dict.fromkeys(os.path.normpath(r) for r in roots):
        if not os.path.isfile(root):
            continue
        crate = {}
        top = Module((), root, os.path.dirname(root))
        crate[()] = top
        todo = [top]
        while todo:
            todo.extend(parse_file(crate, todo.pop(), src))
        trees.append(crate)
    return trees


def resolve(crate, scope, segs):
    """The module (tuple) that `segs`, written in module `scope`, points into, or None."""
    for _ in range(16):  # bounded: re-exports may chain, never loop forever
        first = segs[0]
        if first == "crate":
            base, rest = (), segs[1:]
        elif first == "self":
            base, rest = scope, segs[1:]
        elif first == "super":
            base, rest = scope, segs
            while rest and rest[0] == "super":
                if not base:
                    return None
                base, rest = base[:-1], rest[1:]
        elif first in crate[scope].children:
            base, rest = scope, segs
        elif first in crate[scope].imports and crate[scope].imports[first] != segs:
            # A name this module imported (`use crate::a::b; b::C`): follow it.
            segs = crate[scope].imports[first] + segs[1:]
            continue
        else:
            return None  # std, an extern crate, a local item: not a file of this crate
        mod = base
        followed = False
        for i, seg in enumerate(rest):
            if mod + (seg,) in crate:
                mod = mod + (seg,)
                continue
            target = crate[mod].imports.get(seg)
            if target is not None and target != (seg,):
                # A re-export (`pub use error::Error;` in lib.rs): where it comes from. One
                # from another crate (`use other::x;`, then `crate::x`) is no file here.
                scope, segs, followed = mod, target + rest[i + 1 :], True
            break
        if not followed:
            return mod
    return None


def graph(crate):
    """Edges between files: {from_file: {to_file: (line, text)}}."""
    edges = {}
    for path, module in crate.items():
        for segs, line, _is_use, text in module.refs:
            target = resolve(crate, path, segs)
            if target is None:
                continue
            to = crate[target].file
            if to == module.file:
                continue  # a file importing itself
            edges.setdefault(module.file, {}).setdefault(to, (line, text))
    return edges


def components(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(sorted(comp))
    return out


def check(crate_dir, out):
    """Prints the circles of one crate; returns how many there are."""
    src = os.path.join(crate_dir, "src")
    name = os.path.basename(os.path.normpath(crate_dir))
    files = set()
    for dirpath, _, names in os.walk(src):
        files.update(os.path.join(dirpath, f) for f in names if f.endswith(".rs"))
    circles = []
    seen = set()
    for crate in load_crate(crate_dir):
        edges = graph(crate)
        nodes = {m.file for m in crate.values()}
        for comp in components(nodes, edges):
            if len(comp) > 1 and tuple(comp) not in seen:
                seen.add(tuple(comp))
                circles.append((comp, edges))
    reached = set()
    for crate in load_crate(crate_dir):
        reached.update(m.file for m in crate.values())
    rel = lambda f: os.path.relpath(f, src)
    plural = "" if len(circles) == 1 else "s"
    print(f"{name}: {len(files)} files, {len(circles)} circle{plural}", file=out)
    for comp, edges in circles:
        print(f"  circle of {len(comp)} files: {', '.join(rel(f) for f in comp)}", file=out)
        for a in comp:
            for b, (line, text) in sorted(edges.get(a, {}).items()):
                if b in comp:
                    print(f"    {rel(a)}:{line} -> {rel(b)}  ({text})", file=out)
    for f in sorted(files - reached):
        print(f"  not in the module tree: {rel(f)}", file=out)
    return len(circles)


def workspace_members(root):
    with open(os.path.join(root, "Cargo.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.S | re.M)
    return [os.path.join(root, p) for p in re.findall(r'"([^"]+)"', m.group(1))] if m else [root]


# ---------------------------------------------------------------------------
# Self-test


SELF_TEST_TREE = {
    "Cargo.toml": "[package]\nname = \"t\"\n",
    "src/lib.rs": (
        "//! Docs naming [`crate::c::Z`] are not imports.\n"
        "pub mod a;\nmod b;\nmod c;\n#[path = \"elsewhere/e.rs\"]\nmod e;\nmod f;\n"
        "pub use f::Reexported;\n"
    ),
    # a -> b through a grouped use; b -> a through a path in code: one circle.
    "src/a.rs": "use crate::{b::{self, Thing}, e::E};\npub struct A;\n",
    "src/b.rs": (
        "pub struct Thing;\n"
        "fn f() -> crate::a::A { let _s = \"crate::c::Z\"; let _c = '\"'; crate::a::A }\n"
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b::Thing;\n}\n"
    ),
    # c -> c/d through a child path, c/d -> c through super: another circle.
    "src/c.rs": "mod d;\npub struct Z;\nfn g() { d::h(); }\n",
    "src/c/d.rs": "pub fn h() -> super::Z { super::Z }\n",
    # e only imports; f uses the re-export of itself through the root: no circle with lib.
    "src/elsewhere/e.rs": "pub struct E;\nuse crate::f::Reexported as _R;\n",
    "src/f.rs": "pub struct Reexported;\nfn x() -> crate::Reexported { todo!() }\n",
}


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in SELF_TEST_TREE.items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        crate = load_crate(tmp)[0]
        edges = graph(crate)
        rel = lambda f: os.path.relpath(f, os.path.join(tmp, "src"))
        got = {(rel(a), rel(b)) for a, tos in edges.items() for b in tos}
        want = {
            ("a.rs", "b.rs"),
            ("a.rs", "elsewhere/e.rs"),
            ("b.rs", "a.rs"),
            ("c.rs", "c/d.rs"),
            ("c/d.rs", "c.rs"),
            ("elsewhere/e.rs", "f.rs"),
            ("lib.rs", "f.rs"),
        }
        assert got == want, f"edges: got {sorted(got)}, want {sorted(want)}"
        comps = [sorted(rel(f) for f in c) for c in components({m.file for m in crate.values()}, edges)]
        circles = sorted(c for c in comps if len(c) > 1)
        assert circles == [["a.rs", "b.rs"], ["c.rs", "c/d.rs"]], circles
        # Breaking both circles leaves none.
        os.remove(os.path.join(tmp, "src/c/d.rs"))
        with open(os.path.join(tmp, "src/c/d.rs"), "w", encoding="utf-8") as f:
            f.write("pub fn h() {}\n")
        with open(os.path.join(tmp, "src/b.rs"), "w", encoding="utf-8") as f:
            f.write("pub struct Thing;\n")
        with open(os.devnull, "w") as null:
            assert check(tmp, null) == 0
    print("self-test: ok")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if any(a.startswith("-") for a in argv[1:]):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = argv[1:] or workspace_members(root)
    total = 0
    for d in dirs:
        if not os.path.isdir(os.path.join(d, "src")):
            print(f"{d}: no src/ directory (give a crate directory)", file=sys.stderr)
            return 2
        total += check(d, sys.stdout)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
