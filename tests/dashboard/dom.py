"""A small HTML tree for assertions about rendered pages (the standard library's parser, no extra
dependency): find elements by tag, id, class and attributes, read their text."""

from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Element:
    def __init__(self, tag: str, attrs: dict, parent: "Element | None"):
        self.tag = tag
        self.attrs = attrs
        self.parent = parent
        self.children: list[Element | str] = []

    def __repr__(self):
        return f"<{self.tag} {self.attrs}>"

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def get(self, name: str, default=None):
        return self.attrs.get(name, default)

    def text(self) -> str:
        """The text inside, whitespace collapsed (entities decoded, as a browser shows it)."""
        parts = []

        def walk(node):
            for child in node.children:
                if isinstance(child, str):
                    parts.append(child)
                else:
                    walk(child)

        walk(self)
        return " ".join("".join(parts).split())

    def iter(self):
        for child in self.children:
            if isinstance(child, Element):
                yield child
                yield from child.iter()

    def matches(self, tag=None, id=None, cls=None, **attrs) -> bool:
        if tag is not None and self.tag != tag:
            return False
        if id is not None and self.attrs.get("id") != id:
            return False
        if cls is not None and not set(cls.split()) <= self.classes:
            return False
        for name, value in attrs.items():
            name = name.replace("_", "-")
            if value is True:
                if name not in self.attrs:
                    return False
            elif self.attrs.get(name) != value:
                return False
        return True

    def find_all(self, tag=None, id=None, cls=None, **attrs) -> list["Element"]:
        return [e for e in self.iter() if e.matches(tag, id, cls, **attrs)]

    def find(self, tag=None, id=None, cls=None, **attrs) -> "Element | None":
        return next((e for e in self.iter() if e.matches(tag, id, cls, **attrs)), None)

    def one(self, tag=None, id=None, cls=None, **attrs) -> "Element":
        found = self.find_all(tag, id, cls, **attrs)
        assert len(found) == 1, f"expected one {tag or ''}#{id or ''}.{cls or ''} {attrs}, found {len(found)}"
        return found[0]

    def ancestors(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current)
        self.current.children.append(element)
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse(content) -> Element:
    if isinstance(content, bytes):
        content = content.decode()
    elif hasattr(content, "content"):
        content = content.content.decode()
    builder = _Builder()
    builder.feed(content)
    builder.close()
    return builder.root
