from sagakit.runtime import serve

from inventario.app import SERVICE, create

if __name__ == "__main__":
    serve(create, SERVICE)
