#!/usr/bin/env python3
"""Check the links of the documentation; standard library only.

    .ci/linkcheck.py BOOK_DIR SRC_DIR [MARKDOWN ...]

Run by .ci/docs-check after `mdbook build`. Two passes over the same links:

1. The rendered book (every *.html under BOOK_DIR): each <a href> and
   <img src>. A relative link must name a file of the book, and its
   #fragment an id in that page. A link that leaves the book (mdBook keeps
   `../CONTRIBUTING.md` as `../CONTRIBUTING.html`) is read from where its
   page's source lies, SRC_DIR/X.md for BOOK_DIR/X.html, and must name a
   file or directory of the repository (its .md, for an .html that mdBook
   renamed).
2. The Markdown sources (the MARKDOWN files: README.md and SRC_DIR's pages),
   as a reader on the forge sees them: each link or image outside code must
   name a file or directory of the repository, and its #fragment a heading
   of the page it names, slugged as GitHub and mdBook do (lowercase, spaces
   to '-', punctuation other than '-' and '_' dropped, '-1', '-2' after a
   repeated heading), or an id="..." of that page.

http(s) links are listed, not fetched (the network is closed). Every broken
link is printed as `file: link`; the exit code is 1 if there is any.
"""

import html.parser
import os
import re
import sys
import urllib.parse

REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
SKIPPED_SCHEMES = ("mailto:", "javascript:", "data:", "tel:")


def rel(path):
    return os.path.relpath(path, REPO)


# --- Markdown -------------------------------------------------------------

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def prose_lines(text):
    """The lines of a Markdown text with fenced code blocks blanked out."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append("")
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip().strip(fence[0]):
                fence = None
            out.append("")
        else:
            out.append(line)
    return out


def strip_code_spans(text):
    """Blanks out `code spans` (of any number of backticks)."""
    return re.sub(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", lambda m: " " * len(m.group(0)), text, flags=re.S)


def slug(heading):
    """The anchor GitHub and mdBook give a heading's text."""
    text = re.sub(r"<[^>]+>", "", heading)                       # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)       # links, images
    text = re.sub(r"!?\[([^\]]*)\]\[[^\]]*\]", r"\1", text)
    text = text.replace("`", "")
    text = re.sub(r"\*+", "", text)                              # emphasis
    text = re.sub(r"(?<![0-9A-Za-z])_+|_+(?![0-9A-Za-z])", "", text)
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


def markdown_anchors(path, cache={}):
    """The anchors of a Markdown file: its headings' slugs and its ids."""
    if path in cache:
        return cache[path]
    with open(path, encoding="utf-8") as f:
        lines = prose_lines(f.read())
    anchors, seen = set(), {}

    def add(text):
        m = re.search(r"\s*\{#([^}\s]+)[^}]*\}\s*$", text)      # {#custom-id}
        if m:
            anchors.add(m.group(1))
            return
        base = slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else f"{base}-{n}")

    for i, line in enumerate(lines):
        m = re.match(r"^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$", line)
        if m:
            add(m.group(1) or "")
        elif (i + 1 < len(lines) and line.strip() and not line.startswith("    ")
              and re.match(r"^ {0,3}(=+|-+)\s*$", lines[i + 1])
              and not re.match(r"^ {0,3}([-*+]|\d+[.)])\s", line)
              and not re.match(r"^ {0,3}(=+|-+)\s*$", line)
              and (i == 0 or not lines[i - 1].strip() or lines[i - 1].lstrip().startswith("#"))):
            add(line)                                            # setext heading
        for m in re.finditer(r"""<[A-Za-z][^>]*?\s(?:id|name)\s*=\s*["']([^"']+)["']""",
                             strip_code_spans(line)):
            anchors.add(m.group(1))
    cache[path] = anchors
    return anchors


LINK_DEST = re.compile(r"""\]\(\s*(<[^>\n]*>|[^\s)]*(?:\([^\s)]*\)[^\s)]*)*)""")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
HTML_ATTR = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.I)
AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")


def markdown_links(path):
    with open(path, encoding="utf-8") as f:
        text = strip_code_spans("\n".join(prose_lines(f.read())))
    links = [m.group(1) for m in LINK_DEST.finditer(text)]
    links += [m.group(1) for m in REF_DEF.finditer(text)]
    links += [m.group(1) for m in HTML_ATTR.finditer(text)]
    links += [m.group(1) for m in AUTOLINK.finditer(text)]
    return [link[1:-1] if link.startswith("<") else link for link in links]


def check_in_repo(base_dir, link):
    """None if `link`, read from base_dir, names something of the repository
    (and its fragment a heading or id there), else the reason."""
    parsed = urllib.parse.urlsplit(link)
    path = urllib.parse.unquote(parsed.path)
    if path.startswith("/"):
        target = os.path.join(REPO, path.lstrip("/"))
    else:
        target = os.path.normpath(os.path.join(base_dir, path))
    if not os.path.exists(target):
        md = re.sub(r"\.html$", ".md", target)
        if md != target and os.path.isfile(md):
            target = md
        else:
            return "no such file"
    if not os.path.realpath(target).startswith(REPO + os.sep) and os.path.realpath(target) != REPO:
        return "outside the repository"
    if parsed.fragment:
        if os.path.isdir(target) and os.path.isfile(os.path.join(target, "README.md")):
            target = os.path.join(target, "README.md")
        if not target.endswith(".md"):
            return None
        if urllib.parse.unquote(parsed.fragment) not in markdown_anchors(target):
            return "no such heading"
    return None


def local(link, path, broken, external):
    """Whether `link` is one to check here: http(s) links are only listed,
    other schemes skipped or refused."""
    if not link or link.lower().startswith(SKIPPED_SCHEMES):
        return False
    if re.match(r"^https?://", link, re.I):
        external.add(link)
        return False
    if re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I):
        broken.append((rel(path), link, "unknown scheme"))
        return False
    return True


def check_markdown(files, broken, external):
    for path in files:
        base_dir = os.path.dirname(os.path.abspath(path))
        for link in markdown_links(path):
            if not local(link, path, broken, external):
                continue
            if link.startswith("#"):
                link = os.path.basename(path) + link
            why = check_in_repo(base_dir, link)
            if why:
                broken.append((rel(path), link, why))


# --- The rendered book ----------------------------------------------------

class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links, self.base = set(), [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "base" and attrs.get("href") is not None and self.base is None:
            self.base = attrs["href"]
        elif tag == "a" and attrs.get("href") is not None:
            self.links.append(attrs["href"])
        elif tag == "img" and attrs.get("src") is not None:
            self.links.append(attrs["src"])


def parse_page(path, cache={}):
    if path not in cache:
        page = Page()
        with open(path, encoding="utf-8") as f:
            page.feed(f.read())
        cache[path] = page
    return cache[path]


def check_book(book, src, broken, external):
    book = os.path.abspath(book)
    pages = sorted(os.path.join(d, f) for d, _, fs in os.walk(book) for f in fs if f.endswith(".html"))
    if not pages:
        broken.append((rel(book), "", "no pages: was the book built?"))
    for path in pages:
        page = parse_page(path)
        page_dir = os.path.dirname(path)
        if page.base is not None:                     # 404.html: <base href="/">
            page_dir = book if page.base.startswith("/") else os.path.join(page_dir, page.base)
        for link in page.links:
            if not local(link, path, broken, external):
                continue
            parsed = urllib.parse.urlsplit(link)
            target_path = urllib.parse.unquote(parsed.path)
            if not target_path:
                target = path
            elif target_path.startswith("/"):
                target = os.path.join(book, target_path.lstrip("/"))
            else:
                target = os.path.normpath(os.path.join(page_dir, target_path))
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            inside = os.path.commonpath([book, target]) == book
            if not inside:
                # Out of the book: read it where the page's source lies.
                src_dir = os.path.join(os.path.abspath(src), os.path.relpath(page_dir, book))
                why = check_in_repo(src_dir, link)
                if why:
                    broken.append((rel(path), link, why + " in the repository"))
                continue
            if not os.path.isfile(target):
                broken.append((rel(path), link, "no such file in the book"))
            elif parsed.fragment and target.endswith(".html"):
                if urllib.parse.unquote(parsed.fragment) not in parse_page(target).ids:
                    broken.append((rel(path), link, "no such id"))


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    book, src, markdown = argv[1], argv[2], argv[3:]
    broken, external = [], set()
    check_book(book, src, broken, external)
    check_markdown(markdown, broken, external)
    for link in sorted(external):
        print(f"not fetched: {link}")
    for where, link, why in dict.fromkeys(broken):
        print(f"{where}: {link}  ({why})")
    print(f"{len(broken)} broken link(s)" if broken else "no broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
