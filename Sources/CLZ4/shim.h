#ifndef EVENTKERNEL_CLZ4_SHIM_H
#define EVENTKERNEL_CLZ4_SHIM_H
#include <lz4.h>
#endif
