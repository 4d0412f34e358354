// The web view's only script: ask before a form that deletes something is sent.
// Served from the app (Content-Security-Policy: script-src 'self'), never inline.
document.addEventListener("submit", (event) => {
  const message = event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});
