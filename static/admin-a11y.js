// Django's admin (templates/admin/base_site.html loads this). The two-list selector (SelectFilter2.js)
// builds, once the page has loaded, a magnifier <span> with an aria-label but no role, which ARIA
// does not allow; giving it role="img" makes the label valid. Nothing else of the admin is changed.
window.addEventListener("load", function () {
  "use strict";
  setTimeout(function () {
    document.querySelectorAll("span.help-tooltip[aria-label]:not([role])").forEach(function (icon) {
      icon.setAttribute("role", "img");
    });
  }, 0);
});
