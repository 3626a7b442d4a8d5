package reclaim

// MaxPerSecond lends the spread tests' window count to the external tests.
var MaxPerSecond = maxPerSecond
var ParkedFor = parkedFor
