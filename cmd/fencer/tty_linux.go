package main

import "syscall"

// ioctlGetTermios reads a terminal's attributes.
const ioctlGetTermios = syscall.TCGETS
