package rie

// Running is running, for the external tests: whether a pid still runs
// code (neither gone nor a zombie).
var Running = running
