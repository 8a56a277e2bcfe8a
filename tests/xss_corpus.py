"""Hostile strings for the browser-safety tests (content from applications never runs as
script or HTML in the dashboard), shared by tests/dashboard/test_xss_corpus.py and
tests/browser/test_xss_corpus.py.

Written from the public filter-evasion lists: the OWASP XSS Filter Evasion Cheat Sheet
(cheatsheetseries.owasp.org/cheatsheets/XSS_Filter_Evasion_Cheat_Sheet.html), PortSwigger's
Cross-site scripting cheat sheet (portswigger.net/web-security/cross-site-scripting/cheat-sheet) and
the HTML5 Security Cheatsheet (html5sec.org), plus a few aimed at what this dashboard uses (htmx
attributes, attribute values such as the note edit form and image links).

Every vector that would run calls alert(...) or sets window.__xss. Our validator rejects NUL characters
and lone surrogates, so the NUL tricks of those lists use other control characters (form feed,
vertical tab, SOH), which do reach the database. Every vector is at most 100 characters, so each one fits
every field (API key names are the shortest, 100).
"""

VECTORS: list[tuple[str, str]] = [
    # --- event handlers ------------------------------------------------------------------------
    ("img-onerror", "<img src=x onerror=alert(1)>"),
    ("img-onerror-quoted", '<img src="x" onerror="window.__xss=1">'),
    ("img-slashes", "<img/src/onerror=alert(1)>"),
    ("img-mixed-case", "<IMG SRC=x oNeRrOr=alert(1)>"),
    ("img-entity-parens", "<img src=1 onerror=alert&#40;1&#41;>"),
    ("img-js-unicode-escape", "<img src=x onerror=\\u0061lert(1)>"),
    ("img-eval-alt", "<img src=x:alert(alt) onerror=eval(src) alt=0>"),
    ("img-nested-quotes", "<img src=x onerror=\"alert('\\u0058SS')\">"),
    ("svg-onload", "<svg onload=alert(1)>"),
    ("svg-slash-onload", "<svg/onload=alert(1)>"),
    ("body-onload", "<body onload=alert(1)>"),
    ("body-onpageshow", "<body onpageshow=alert(1)>"),
    ("details-ontoggle", "<details open ontoggle=alert(1)>"),
    ("video-source-onerror", "<video><source onerror=alert(1)></video>"),
    ("audio-onerror", "<audio src=x onerror=alert(1)>"),
    ("input-autofocus", "<input autofocus onfocus=alert(1)>"),
    ("select-autofocus", "<select autofocus onfocus=alert(1)></select>"),
    ("textarea-autofocus", "<textarea autofocus onfocus=alert(1)></textarea>"),
    ("div-tabindex-autofocus", "<div tabindex=1 autofocus onfocus=window.__xss=1>x</div>"),
    ("custom-element-focus", "<xss id=x tabindex=1 onfocus=alert(1)></xss>"),
    ("marquee-onstart", "<marquee onstart=alert(1)>x</marquee>"),
    ("fullscreen-mouseover", '<div onmouseover="alert(1)" style="position:fixed;inset:0">x</div>'),
    ("a-onclick", '<a href="#" onclick="alert(1)">click me</a>'),
    ("iframe-onload", "<iframe onload=alert(1)></iframe>"),
    ("style-onload", "<style onload=alert(1)></style>"),
    ("object-onerror", "<object data=x onerror=alert(1)></object>"),
    ("isindex", "<isindex type=image src=1 onerror=alert(1)>"),
    # --- script elements -----------------------------------------------------------------------
    ("script", "<script>alert(1)</script>"),
    ("script-mixed-case", "<ScRiPt>window.__xss=1</sCrIpT>"),
    ("script-src-data", "<script src=data:,alert(1)></script>"),
    ("script-fromcharcode", "<script>alert(String.fromCharCode(88,83,83))</script>"),
    ("script-split", "<scr<script>ipt>alert(1)</scr</script>ipt>"),
    ("script-slash-attr", "<script/x>alert(1)</script>"),
    ("script-double-open", "<<script>alert(1);//<</script>"),
    # --- javascript: URLs -----------------------------------------------------------------------
    ("js-url", '<a href="javascript:alert(1)">click</a>'),
    ("js-url-case", '<a href="JaVaScRiPt:alert(1)">x</a>'),
    ("js-url-entity-tab", '<a href="jav&#x09;ascript:alert(1)">x</a>'),
    ("js-url-raw-tab", '<a href="jav\tascript:alert(1)">x</a>'),
    ("js-url-raw-newline", '<a href="java\nscript:alert(1)">x</a>'),
    ("js-url-leading-control", '<a href=" &#14;  javascript:alert(1)">x</a>'),
    ("js-url-decimal-entities", '<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)">x</a>'),
    ("js-url-named-colon", '<a href="javascript&colon;alert(1)">x</a>'),
    ("js-url-iframe", '<iframe src="javascript:alert(1)"></iframe>'),
    ("js-url-form-action", '<form action="javascript:alert(1)"><button>go</button></form>'),
    ("js-url-formaction", "<button formaction=javascript:alert(1)>x</button>"),
    ("js-url-math-xlink", '<math><a xlink:href="javascript:alert(1)">x</a></math>'),
    ("js-url-table-background", '<table background="javascript:alert(1)">'),
    ("js-url-link-stylesheet", '<link rel=stylesheet href="javascript:alert(1)">'),
    # --- SVG -------------------------------------------------------------------------------------
    ("svg-script", "<svg><script>alert(1)</script></svg>"),
    ("svg-animate-onbegin", "<svg><animate onbegin=alert(1) attributeName=x dur=1s>"),
    ("svg-animate-href", "<svg><a><animate attributeName=href values=javascript:alert(1) /><text y=20>x</text></a>"),
    ("svg-set-href", "<svg><a><set attributeName=href to=javascript:alert(1) /><text y=20>x</text></a></svg>"),
    ("svg-foreignobject", '<svg><foreignObject><iframe srcdoc="<script>alert(1)</script>"/></foreignObject></svg>'),
    ("svg-use-data", '<svg><use href="data:image/svg+xml,<svg id=x onload=alert(1)>#x"/></svg>'),
    # --- data: URLs ------------------------------------------------------------------------------
    ("data-html-link", '<a href="data:text/html,<script>alert(1)</script>">x</a>'),
    ("data-html-base64-iframe", '<iframe src="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="></iframe>'),
    ("data-html-base64-object", '<object data="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">'),
    ("data-svg-embed", '<embed src="data:image/svg+xml,<svg onload=alert(1)>">'),
    ("data-svg-img", '<img src="data:image/svg+xml,<svg onload=alert(1)>">'),
    # --- breaking out of attributes and raw-text elements --------------------------------------
    ("attr-double-quote", '"><script>alert(1)</script>'),
    ("attr-single-quote", "'><svg onload=alert(1)>"),
    ("attr-inject-double", '" autofocus onfocus="alert(1)'),
    ("attr-inject-single", "' autofocus onfocus='alert(1)"),
    ("attr-nested-quotes", '"\'"><img src=x onerror=alert(1)>'),
    ("close-textarea", "</textarea><script>alert(1)</script>"),
    ("close-title", "</title><script>alert(1)</script>"),
    ("close-style", "</style><script>alert(1)</script>"),
    ("close-script", "</script><script>alert(1)</script>"),
    ("close-pre", "</pre><img src=x onerror=alert(1)>"),
    ("close-noscript", "</noscript><img src=x onerror=alert(1)>"),
    ("close-comment", "--><script>alert(1)</script>"),
    ("close-cdata", "]]><script>alert(1)</script>"),
    # --- elements that load or redirect -----------------------------------------------------------
    ("iframe-srcdoc", '<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>'),
    ("meta-refresh", '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">'),
    ("base-href", '<base href="javascript:alert(1)//">'),
    ("object-js", '<object data="javascript:alert(1)"></object>'),
    ("embed-js", '<embed src="javascript:alert(1)">'),
    ("css-url-js", '<div style="background:url(javascript:alert(1))">x</div>'),
    ("css-import", "<style>@import 'javascript:alert(1)';</style>"),
    # --- broken and unclosed markup, mutation XSS -------------------------------------------------
    ("unclosed-img", "<img src=x onerror=alert(1)//"),
    ("unclosed-svg", "<svg onload=alert(1)"),
    ("unclosed-script", "<script>alert(1)"),
    ("unclosed-attr", '<a href="javascript:alert(1)'),
    ("comment-trick", '<!--<img src="--><img src=x onerror=alert(1)//">'),
    ("cdata", "<![CDATA[<script>alert(1)</script>]]>"),
    ("xml-namespace-script", '<html:script xmlns:html="http://www.w3.org/1999/xhtml">alert(1)</html:script>'),
    ("mxss-math-mglyph", "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>"),
    ("mxss-noscript-title", '<noscript><p title="</noscript><img src=x onerror=alert(1)>">'),
    ("mxss-svg-p-style", '<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">'),
    # --- templates, frameworks and htmx ------------------------------------------------------------
    ("template-constructor", "{{constructor.constructor('alert(1)')()}}"),
    ("template-literal", "${alert(1)}"),
    ("template-erb", "{{7*7}}<%= alert(1) %>"),
    ("angular-ng-focus", "<div ng-app ng-csp><input autofocus ng-focus=$event.view.alert(1)>"),
    ("htmx-hx-on", '<button hx-on:click="alert(1)">x</button>'),
    ("htmx-hx-on-load", '<div hx-on::load="alert(1)">x</div>'),
    ("htmx-data-hx-on", '<img src=x data-hx-on:htmx:load="alert(1)">'),
    ("htmx-hx-get-load", '<div hx-get="data:text/html,<img src=x onerror=alert(1)>" hx-trigger="load">'),
    # --- encodings, unicode and control characters ---------------------------------------------------
    ("fullwidth-brackets", "＜script＞alert(1)＜/script＞"),
    ("js-unicode-escapes", "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e"),
    ("js-hex-escapes", "\\x3cscript\\x3ealert(1)\\x3c/script\\x3e"),
    ("url-encoded", "%3Cscript%3Ealert(1)%3C%2Fscript%3E"),
    ("pre-escaped", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("double-escaped", "&amp;lt;img src=x onerror=alert(1)&amp;gt;"),
    ("form-feed-separator", "<img\x0csrc=x\x0conerror=alert(1)>"),
    ("control-chars", "<scr\x01ipt>alert(1)</scr\x0bipt><img src=x onerror=alert(1)\x01>"),
    ("zero-width", "<scr\u200bipt>alert(1)</script><img src=x on\u200berror=alert(1)>"),
    ("rtl-override", "\u202e<script>alert(1)</script>"),
    ("line-separator", "<img src=x onerror=\"alert(1)\u2028\">"),
    ("emoji-astral", "\U0001f600<img src=x onerror=alert('\U0001f600')>"),
]

PAYLOADS: list[str] = [payload for _, payload in VECTORS]
IDS: list[str] = [name for name, _ in VECTORS]
MARKUP_CHARS = set("<>\"'")


def has_markup(payload: str) -> bool:
    """Whether the payload has a character that HTML escaping always changes, so that finding it unchanged
    in a page means the escaping failed. (`&` alone does not count: "&lt;script&gt;" is also what a
    correctly escaped "<script>" looks like.)"""
    return bool(MARKUP_CHARS & set(payload))


def pack(payloads: list[str], limit: int, separator: str = " | ") -> list[list[str]]:
    """Consecutive payloads grouped so each group joined by `separator` fits in `limit` characters."""
    groups: list[list[str]] = [[]]
    for payload in payloads:
        group = groups[-1]
        if group and len(separator.join([*group, payload])) > limit:
            groups.append(group := [])
        group.append(payload)
    return [g for g in groups if g]
