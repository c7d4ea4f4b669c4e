document.addEventListener("DOMContentLoaded", function () { console.log("ready"); });
document.addEventListener("DOMContentLoaded", function () { console.log("ready"); });
document.addEventListener("DOMContentLoaded", function () { console.log("ready"); });
document.addEventListener("DOMContentLoaded", function () { console.log("ready"); });
document.addEventListener("DOMContentLoaded", function () { console.log("ready"); });
document.addEventListener("DOMContentLoaded", function () { console.log("ready"); });
