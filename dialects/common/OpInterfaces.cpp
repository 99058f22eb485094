#include "common/OpInterfaces.h"

#include "common/OpInterfaces.cpp.inc"
