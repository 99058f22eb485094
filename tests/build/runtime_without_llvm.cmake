# Configures SOURCE_DIR with -DDTC_BUILD_COMPILER=OFF into BINARY_DIR, builds dtrun, and fails if
# any compile command mentions LLVM or MLIR. (The CUDA plugin is off: dtrun never links it, and
# nvcc would only slow the test down.)
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G Ninja -DDTC_BUILD_COMPILER=OFF
          -DDTC_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release -DDTC_BUILD_CUDA=OFF
  RESULT_VARIABLE configure_result)
if(NOT configure_result EQUAL 0)
  message(FATAL_ERROR "configuring the runtime alone failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target dtrun
                RESULT_VARIABLE build_result)
if(NOT build_result EQUAL 0)
  message(FATAL_ERROR "building dtrun without the compiler failed")
endif()
file(READ ${BINARY_DIR}/compile_commands.json commands)
string(TOLOWER "${commands}" commands)
if(commands MATCHES "llvm|mlir")
  message(FATAL_ERROR "an LLVM/MLIR path leaked into the runtime-only build")
endif()
if(NOT EXISTS ${BINARY_DIR}/tools/dtrun/dtrun)
  message(FATAL_ERROR "dtrun was not built")
endif()
message(STATUS "runtime-only build: ok")
