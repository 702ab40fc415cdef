/* version.h - jobrunner's version, as `jobrunner --version` prints it and
 * the runner logs it at start: a constant only, below every layer that
 * says it. Uses nothing. */
#ifndef JR_VERSION_H
#define JR_VERSION_H

#define JR_VERSION "0.1.0"

#endif
