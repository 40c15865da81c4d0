// MathJax for pymdownx.arithmatex's generic output (\( … \) inline, \[ … \] display), from the docstrings
// and the pages. The build fetches nothing: MathJax itself is loaded by the browser (mkdocs.yml's
// extra_javascript); without it (offline, no JavaScript) the formulas read as their LaTeX source.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex"
  }
};

// Material's instant navigation swaps pages without reloading: typeset each new page.
document$.subscribe(() => {
  MathJax.startup.output.clearCache()
  MathJax.typesetClear()
  MathJax.texReset()
  MathJax.typesetPromise()
})
