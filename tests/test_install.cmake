# Installs the build into a scratch prefix, then builds tests/consumer against
# it three ways (pkg-config; find_package with the shared and the static
# library) and runs each, and the README's example through pkg-config. Run by ctest as `cmake -P` with BINARY_DIR,
# SOURCE_DIR, LIBDIR, C_COMPILER and C_FLAGS.
set(prefix ${BINARY_DIR}/install-test)
set(work ${BINARY_DIR}/consumer-test)
file(REMOVE_RECURSE ${prefix} ${work})
file(MAKE_DIRECTORY ${work})
separate_arguments(flags UNIX_COMMAND "${C_FLAGS}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

function(check_output what)
  if(NOT out MATCHES "tensor\\(\\[\\[1\\., 1\\., 1\\.\\],.*device='(cpu|gpu):0'\\)")
    message(FATAL_ERROR "${what}: unexpected output:\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

run(${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${prefix})
foreach(f include/cltensor.h include/cltensor/tensor.h ${LIBDIR}/libcltensor.a ${LIBDIR}/libcltensor.so
          ${LIBDIR}/pkgconfig/cltensor.pc ${LIBDIR}/cmake/cltensor/cltensorConfig.cmake bin/clt)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# pkg-config, as a Makefile would use it.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run(pkg-config --cflags --libs cltensor)
string(STRIP "${out}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run(${C_COMPILER} ${flags} ${SOURCE_DIR}/tests/consumer/main.c ${pc_flags} -o ${work}/consumer-pc)
set(ENV{LD_LIBRARY_PATH} ${prefix}/${LIBDIR})
run(${work}/consumer-pc)
check_output("pkg-config")
# The README's example (docs/examples/hello.c) builds and runs the same way.
run(${C_COMPILER} ${flags} ${SOURCE_DIR}/docs/examples/hello.c ${pc_flags} -o ${work}/hello)
run(${work}/hello)
if(NOT out MATCHES "tensor\\(\\[\\[3\\.5000, 3\\.5000, 3\\.5000\\],.*allocated 72 B")
  message(FATAL_ERROR "docs/examples/hello.c: unexpected output:\n${out}")
endif()
unset(ENV{LD_LIBRARY_PATH})
# README: without LD_LIBRARY_PATH, an rpath finds the library.
run(${C_COMPILER} ${flags} ${SOURCE_DIR}/docs/examples/hello.c ${pc_flags} -Wl,-rpath,${prefix}/${LIBDIR}
    -o ${work}/hello-rpath)
run(${work}/hello-rpath)
if(NOT out MATCHES "allocated 72 B")
  message(FATAL_ERROR "hello with an rpath: unexpected output:\n${out}")
endif()
message(STATUS "rpath: ok")

# find_package(cltensor), shared and static.
foreach(target cltensor::cltensor cltensor::cltensor_static)
  string(REPLACE "::" "-" dir ${target})
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${work}/${dir} -DCMAKE_PREFIX_PATH=${prefix}
      -DCMAKE_C_COMPILER=${C_COMPILER} "-DCMAKE_C_FLAGS=${C_FLAGS}" -DCLT_CONSUMER_TARGET=${target})
  run(${CMAKE_COMMAND} --build ${work}/${dir})
  run(${work}/${dir}/consumer)
  check_output("find_package ${target}")
endforeach()
